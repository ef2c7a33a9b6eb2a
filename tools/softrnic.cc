// `softrnic`: the command-line tool. Dispatches to its subcommands:
//
//   softrnic stat ...          live counters of every softrnic device (softrnic_stat.cc)
//   softrnic run [--] CMD ...  CMD with softrnic's libraries and device view (softrnic_run.cc)
//   softrnic setup [--remove]  the device view system-wide, as root (softrnic_setup.cc)
//   softrnic config [--markdown]  the SOFTRNIC_* variables (softrnic_config.cc)
//   softrnic doctor            checks the setup, says how to fix it (softrnic_doctor.cc)
//   softrnic capture -w F -- CMD  a pcapng of CMD's RoCE v2 packets (softrnic_capture.cc)
//   softrnic devinfo [--peer A]  the device as ibv_devinfo sees it, a peer's path (softrnic_devinfo.cc)
//   softrnic chaos [-s S] -- CMD  CMD under a matrix of network faults, a verdict table (softrnic_chaos.cc)
#include <cstdio>
#include <cstring>

#include "commands.h"

namespace {

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: softrnic stat [-p PID] [-w SECS [-c COUNT]] [-r | -j | -P] [-q] [-d DIR] [--clean]\n"
               "       softrnic run [--] CMD [ARGS...]\n"
               "       softrnic setup [--remove]\n"
               "       softrnic config [--markdown]\n"
               "       softrnic doctor\n"
               "       softrnic capture -w FILE [-s MB] [-n FILES] [-k] [--] CMD [ARGS...]\n"
               "       softrnic devinfo [-j] [--peer ADDRESS] [--peer-pid PID]\n"
               "       softrnic chaos [-s SCENARIO]... [-l SECONDS] [--server CMD] -- CMD [ARGS...]\n"
               "       softrnic help\n"
               "stat:  the counters of every running softrnic device (docs/hardening.md);\n"
               "       -j JSON, -P (--prometheus) the Prometheus text format\n"
               "run:   CMD with softrnic's libraries and a private /dev/infiniband and\n"
               "       /sys/class/infiniband for middleware (docs/user-guide.md)\n"
               "setup: the same device files system-wide (root); --remove undoes it\n"
               "config: every SOFTRNIC_* variable, its value here and what it does\n"
               "       (docs/configuration.md)\n"
               "doctor: checks the setup (libraries, UDP 4791, shared memory, clock) and\n"
               "       says how to fix what is wrong; exit 1 if something is\n"
               "capture: CMD's RoCE v2 packets on every path (shared memory included) as\n"
               "       pcapng for Wireshark/tshark (docs/capture.md)\n"
               "devinfo: the device as ibv_devinfo would show it here (GIDs and their\n"
               "       endpoints, capabilities, transport); --peer: which path packets to\n"
               "       a peer take (shared memory or UDP, from which GID) and why\n"
               "chaos: CMD (or a server/client pair) under each scenario of network faults;\n"
               "       a table of verdicts, retransmissions and errors (docs/fault-lab.md)\n"
               "`softrnic COMMAND --help` describes each.\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace softrnic::tools;
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "--help")) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char* cmd = argv[1];
  if (!std::strcmp(cmd, "stat") || !std::strcmp(cmd, "statistic")) return StatMain(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "run")) return RunMain(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "setup")) return SetupMain(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "config")) return ConfigMain(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "doctor")) return DoctorMain(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "capture")) return CaptureMain(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "devinfo")) return DevinfoMain(argc - 1, argv + 1);
  if (!std::strcmp(cmd, "chaos")) return ChaosMain(argc - 1, argv + 1);
  std::fprintf(stderr, "softrnic: unknown command '%s'\n", cmd);
  Usage(stderr);
  return 2;
}
