// The `softrnic` tool's subcommands. Each takes the arguments after
// `softrnic` (argv[0] is the subcommand's name) and returns the exit status.
#pragma once

namespace softrnic::tools {

int StatMain(int argc, char** argv);   // softrnic_stat.cc
int RunMain(int argc, char** argv);    // softrnic_run.cc
int SetupMain(int argc, char** argv);  // softrnic_setup.cc
int ConfigMain(int argc, char** argv); // softrnic_config.cc
int DoctorMain(int argc, char** argv); // softrnic_doctor.cc
int CaptureMain(int argc, char** argv); // softrnic_capture.cc
int DevinfoMain(int argc, char** argv); // softrnic_devinfo.cc
int ChaosMain(int argc, char** argv);   // softrnic_chaos.cc

}  // namespace softrnic::tools
