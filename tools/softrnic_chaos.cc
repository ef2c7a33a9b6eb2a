// `softrnic chaos`: runs a verbs program (or a server/client pair) under
// each scenario of a matrix of network faults and prints one table: what
// the program did (exit status, time) and what its queue pairs lived
// through (retransmissions, timeouts, completions in error, faults applied:
// the devices' trace summaries, SOFTRNIC_TRACE). docs/fault-lab.md.
//
// Each run gets its own directory under --out with the commands' output
// and their traces (Perfetto / chrome://tracing JSON), kept for a look.
// Faults apply in the client's process (the command after --) unless
// --faults-on says otherwise: one end's scenario already acts on both
// directions of its traffic, and applying it at both ends would double it.
//
// Exit status: 0 when every run is ok; 1 when the program failed under
// some scenario (a finding about the program); 3 when a run hung past the
// limit or crashed; 2 on usage errors or a scenario with an error (then
// nothing runs).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "chaos_report.h"
#include "commands.h"
#include "faults/scenario_parse.h"
#include "self_lib_dir.h"

namespace softrnic::tools {
namespace {

constexpr int kUsage = 2;

void ChaosUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: softrnic chaos [-s SCENARIO]... [-f FAULTS]... [-l SECONDS] [--server CMD]\n"
      "                      [--server-wait SECONDS] [--faults-on client|server|both]\n"
      "                      [-o DIR] [--no-baseline] [--list] -- CMD [ARGS...]\n"
      "Runs CMD (with --server: the shell command CMD first, then after --server-wait\n"
      "seconds the client after --) once without faults and once under each scenario,\n"
      "then prints: scenario, verdict (ok, FAILED, HANG, CRASH), exit status, time,\n"
      "retransmissions, timeouts, completions in error and faults applied.\n"
      "  -s SCENARIO   a scenario file (TOML) or the name of a shipped one (--list);\n"
      "                default: every shipped scenario\n"
      "  -f FAULTS     a one-line scenario, as SOFTRNIC_FAULTS (e.g. drop=0.05)\n"
      "  -l SECONDS    a run still going after this long is killed: HANG (default 60)\n"
      "  --server CMD  a server started with /bin/sh -c before each run, waited for\n"
      "  --faults-on   whose packets the faults act on (default client)\n"
      "  -o DIR        where each run's output and traces go (default: a new\n"
      "                directory under $TMPDIR)\n"
      "Middleware that looks for /dev/infiniband (UCX, MPI): `softrnic run softrnic chaos ...`.\n"
      "Exit status: 0 all ok; 1 the program failed under a scenario; 3 a run hung or\n"
      "crashed; 2 usage error or a bad scenario (nothing runs). docs/fault-lab.md.\n");
}

struct Scenario {
  std::string name;
  std::string description;
  std::string file;       // SOFTRNIC_FAULTS_FILE, or
  std::string one_line;   // SOFTRNIC_FAULTS; both empty: the baseline
};

// The shipped scenarios: $SOFTRNIC_SCENARIO_DIR, else P/share/softrnic/
// scenarios beside P/bin/softrnic (installed; a build tree has a copy of
// share/scenarios there too, made by CMake).
std::string ShippedScenarioDir() {
  if (const char* env = std::getenv("SOFTRNIC_SCENARIO_DIR"); env && *env) return env;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/'));           // P/bin
    dir = dir.substr(0, dir.rfind('/'));           // P
    return dir + "/share/softrnic/scenarios";
  }
  return "";
}

std::vector<std::string> TomlFilesIn(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".toml") == 0) files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A file name fit for a directory: letters, digits, '-', '_', '.'.
std::string Slug(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out.substr(0, 64);
}

struct Child {
  pid_t pid = -1;
  bool done = false;
  int status = 0;
};

// Starts argv in a process group of its own (so a hang is killed whole),
// output to `log`, the keys in `unset_keys` removed from its environment and
// each KEY=VALUE of `set` added.
Child Start(const std::vector<std::string>& argv, const std::vector<std::string>& set,
            const std::vector<std::string>& unset_keys, const std::string& log) {
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    setpgid(0, 0);
    for (const std::string& k : unset_keys) unsetenv(k.c_str());
    for (const std::string& kv : set) {
      const size_t eq = kv.find('=');
      setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, 0);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "softrnic chaos: %s: %s\n", args[0], std::strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  if (c.pid > 0) setpgid(c.pid, c.pid);  // also from here: no race with a kill below
  return c;
}

bool Reap(Child& c) {
  if (c.done || c.pid <= 0) return true;
  if (waitpid(c.pid, &c.status, WNOHANG) == c.pid) c.done = true;
  return c.done;
}

// Waits until the child exits or the deadline passes; false: still running.
bool WaitUntil(Child& c, std::chrono::steady_clock::time_point deadline) {
  while (!Reap(c)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void KillGroup(Child& c) {
  if (c.pid <= 0 || c.done) return;
  kill(-c.pid, SIGKILL);
  waitpid(c.pid, &c.status, 0);
  c.done = true;
}

void Fill(const Child& c, bool hung, int* exit_status, int* sig, bool* hung_out) {
  *hung_out = hung;
  if (hung) return;
  if (WIFEXITED(c.status)) *exit_status = WEXITSTATUS(c.status);
  if (WIFSIGNALED(c.status)) *sig = WTERMSIG(c.status);
}

std::string FirstErrorLine(const std::string& log) {
  std::istringstream in(ReadFile(log));
  std::string line;
  while (std::getline(in, line))
    if (LooksLikeError(line)) return line;
  return "";
}

}  // namespace

int ChaosMain(int argc, char** argv) {
  std::vector<Scenario> scenarios;
  std::vector<std::string> scenario_args, one_lines;
  double limit = 60, server_wait = 1;
  std::string server, faults_on = "client", out_dir;
  bool baseline = true, list = false;
  int i = 1;  // argv[0] is "chaos"
  auto value = [&](const char* opt) -> const char* {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "softrnic chaos: %s needs a value\n", opt);
      return nullptr;
    }
    return argv[++i];
  };
  auto seconds = [](const char* text, double* out) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0) || v > 86400) return false;
    *out = v;
    return true;
  };
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = nullptr;
    if (a == "--") {
      ++i;
      break;
    } else if (a == "-h" || a == "--help") {
      ChaosUsage(stdout);
      return 0;
    } else if (a == "--list") {
      list = true;
    } else if (a == "--no-baseline") {
      baseline = false;
    } else if (a == "-s" || a == "--scenario") {
      if (!(v = value("-s"))) return kUsage;
      scenario_args.push_back(v);
    } else if (a == "-f" || a == "--faults") {
      if (!(v = value("-f"))) return kUsage;
      one_lines.push_back(v);
    } else if (a == "-l" || a == "--limit") {
      if (!(v = value("-l"))) return kUsage;
      if (!seconds(v, &limit)) {
        std::fprintf(stderr, "softrnic chaos: -l wants seconds in (0, 86400], not '%s'\n", v);
        return kUsage;
      }
    } else if (a == "--server") {
      if (!(v = value("--server"))) return kUsage;
      server = v;
    } else if (a == "--server-wait") {
      if (!(v = value("--server-wait"))) return kUsage;
      if (!seconds(v, &server_wait)) {
        std::fprintf(stderr, "softrnic chaos: --server-wait wants seconds, not '%s'\n", v);
        return kUsage;
      }
    } else if (a == "--faults-on") {
      if (!(v = value("--faults-on"))) return kUsage;
      faults_on = v;
      if (faults_on != "client" && faults_on != "server" && faults_on != "both") {
        std::fprintf(stderr, "softrnic chaos: --faults-on is client, server or both\n");
        return kUsage;
      }
    } else if (a == "-o" || a == "--out") {
      if (!(v = value("-o"))) return kUsage;
      out_dir = v;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "softrnic chaos: unknown option '%s'\n", a.c_str());
      ChaosUsage(stderr);
      return kUsage;
    } else {
      break;
    }
  }

  // The matrix, every scenario checked before anything runs.
  const std::string shipped = ShippedScenarioDir();
  std::vector<std::string> files;
  for (const std::string& s : scenario_args) {
    struct stat st{};
    files.push_back(stat(s.c_str(), &st) == 0 ? s : shipped + "/" + s + ".toml");
  }
  if (scenario_args.empty() && one_lines.empty()) files = TomlFilesIn(shipped);
  if (list) {
    for (const std::string& f : TomlFilesIn(shipped)) {
      const faults::ParseResult r = faults::ParseScenarioFile(f);
      std::printf("%-16s %s\n", r.ok ? r.scenario.name.c_str() : f.c_str(),
                  r.ok ? r.scenario.description.c_str() : r.error.c_str());
    }
    return 0;
  }
  if (i >= argc) {
    ChaosUsage(stderr);
    return kUsage;
  }
  if (files.empty() && one_lines.empty()) {
    std::fprintf(stderr, "softrnic chaos: no scenarios in '%s' (set SOFTRNIC_SCENARIO_DIR or use -s)\n",
                 shipped.c_str());
    return kUsage;
  }
  if (baseline) scenarios.push_back({"none", "no faults", "", ""});
  for (const std::string& f : files) {
    const faults::ParseResult r = faults::ParseScenarioFile(f);
    if (!r.ok) {
      std::fprintf(stderr, "softrnic chaos: %s\nnothing was run\n", r.error.c_str());
      return kUsage;
    }
    scenarios.push_back({r.scenario.name, r.scenario.description, f, ""});
  }
  for (const std::string& line : one_lines) {
    const faults::ParseResult r = faults::ParseOneLine(line);
    if (!r.ok) {
      std::fprintf(stderr, "softrnic chaos: -f '%s': %s\nnothing was run\n", line.c_str(), r.error.c_str());
      return kUsage;
    }
    scenarios.push_back({line, "", "", line});
  }

  if (out_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/softrnic-chaos-XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::fprintf(stderr, "softrnic chaos: mkdtemp: %s\n", std::strerror(errno));
      return kUsage;
    }
    out_dir = templ;
  } else if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "softrnic chaos: %s: %s\n", out_dir.c_str(), std::strerror(errno));
    return kUsage;
  }

  // softrnic's libraries for every process, as `softrnic run` gives them.
  std::vector<std::string> common;
  if (const std::string lib = SelfLibDir(); !lib.empty()) {
    const char* old = std::getenv("LD_LIBRARY_PATH");
    common.push_back("LD_LIBRARY_PATH=" + lib + (old && *old ? std::string(":") + old : ""));
  }
  // Every packet on the wire, where the faults are (docs/fault-lab.md).
  common.push_back("SOFTRNIC_TRANSPORT=udp");
  const std::vector<std::string> unset = {"SOFTRNIC_FAULTS", "SOFTRNIC_FAULTS_FILE", "SOFTRNIC_TRACE"};
  const std::vector<std::string> client_argv(argv + i, argv + argc);

  std::vector<ChaosRun> runs;
  bool any_failed = false, any_broken = false;
  for (size_t k = 0; k < scenarios.size(); ++k) {
    const Scenario& s = scenarios[k];
    const std::string dir = out_dir + "/" + std::to_string(k) + "-" + Slug(s.name);
    mkdir(dir.c_str(), 0755);
    std::vector<std::string> plain = common, faulted = common;
    plain.push_back("SOFTRNIC_TRACE=" + dir + "/trace-%p.json");
    faulted.push_back("SOFTRNIC_TRACE=" + dir + "/trace-%p.json");
    if (!s.file.empty()) faulted.push_back("SOFTRNIC_FAULTS_FILE=" + s.file);
    if (!s.one_line.empty()) faulted.push_back("SOFTRNIC_FAULTS=" + s.one_line);
    std::fprintf(stderr, "softrnic chaos: [%zu/%zu] %s%s%s\n", k + 1, scenarios.size(), s.name.c_str(),
                 s.description.empty() ? "" : ": ", s.description.c_str());

    ChaosRun run;
    run.scenario = s.name;
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(limit + (server.empty() ? 0 : server_wait)));
    Child srv;
    if (!server.empty()) {
      run.has_server = true;
      srv = Start({"/bin/sh", "-c", server}, faults_on != "client" ? faulted : plain, unset,
                  dir + "/server.log");
      // The client starts when the server had its time to listen (or died).
      WaitUntil(srv, t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(server_wait)));
    }
    const auto c0 = std::chrono::steady_clock::now();
    Child cli = Start(client_argv, faults_on != "server" ? faulted : plain, unset, dir + "/client.log");
    const bool cli_done = WaitUntil(cli, deadline);
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    if (!cli_done) KillGroup(cli);
    Fill(cli, !cli_done, &run.exit_status, &run.signal, &run.hung);
    if (run.has_server) {
      // A server whose client failed may wait for it for ever (as it would
      // on any NIC: nothing tells it the client is gone): then it is
      // stopped 5 s later and not called hung.
      const bool client_ok = cli_done && WIFEXITED(cli.status) && WEXITSTATUS(cli.status) == 0;
      const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      const bool srv_done = WaitUntil(srv, client_ok ? std::max(deadline, grace) : grace);
      if (!srv_done) KillGroup(srv);
      Fill(srv, !srv_done && client_ok, &run.server_exit_status, &run.server_signal, &run.server_hung);
      if (!srv_done && !client_ok) run.server_stopped = true;
    }
    // The devices' summaries (a killed process wrote none).
    TraceTotals totals;
    bool any_summary = false;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() > 9 && name.compare(name.size() - 9, 9, ".json.txt") == 0)
          any_summary |= AddTraceSummary(ReadFile(dir + "/" + name), &totals);
      }
      closedir(d);
    }
    if (any_summary) run.totals = totals;
    run.first_error_line = FirstErrorLine(dir + "/client.log");
    if (run.first_error_line.empty() && run.has_server) run.first_error_line = FirstErrorLine(dir + "/server.log");
    const std::string verdict = Verdict(run);
    any_failed |= verdict == "FAILED";
    any_broken |= verdict == "HANG" || verdict == "CRASH";
    runs.push_back(run);
  }
  std::printf("%s", FormatChaosTable(runs, limit).c_str());
  std::printf("\noutput and traces (open a trace-*.json in https://ui.perfetto.dev or chrome://tracing): %s\n",
              out_dir.c_str());
  return any_broken ? 3 : any_failed ? 1 : 0;
}

}  // namespace softrnic::tools
