// `softrnic doctor`: checks what softrnic needs from this host and this
// environment, and says how to fix what is wrong. One line per check,
// "ok" or "PROBLEM", then for a problem a "fix:" line:
//
//   libibverbs    softrnic's own libibverbs.so.1 is installed beside this
//                 tool (a problem if not), and which one a verbs program
//                 started from here without `softrnic run` would load
//                 (LD_LIBRARY_PATH searched in order as the dynamic loader
//                 does, then the loader's cache; informational: `softrnic
//                 run` is the documented way); told apart from rdma-core's
//                 by softrnic_create_gsi_qp, a symbol only softrnic's
//                 library exports (src/verbs/libibverbs.map)
//   udp-port      UDP 4791 (or SOFTRNIC_PORT) is free, or held only by
//                 softrnic devices: no socket on the wildcard address (which
//                 fails every bind softrnic makes, src/transport), none of
//                 another program on a host address (remote peers' packets
//                 would reach it instead)
//   shared-memory /dev/shm is a writable directory, this user's endpoint-link
//                 directory is private, and a sealed memfd maps shared and
//                 reopens through /proc/self/fd as a same-host peer opens it
//                 (docs/shm.md)
//   clock         CLOCK_MONOTONIC (the engine's timers) works, its resolution
//   stale-files   stats files and endpoint links of this user's dead
//                 processes, which `softrnic stat` removes (informational)
//
// Changes nothing. Exit status: 0 if every check is ok, 1 if any found a
// problem, 2 on usage errors.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "config/environment.h"
#include "elf_symbols.h"
#include "printable.h"
#include "engine/observe/stats_publisher.h"
#include "self_lib_dir.h"
#include "transport/owned_files.h"
#include "transport/shm_registry.h"
#include "transport/transport.h"
#include "udp_port_holders.h"

namespace softrnic::tools {
namespace {

// Exported only by softrnic's libibverbs.so.1 (SOFTRNIC_PRIVATE_1).
constexpr const char* kSoftrnicSymbol = "softrnic_create_gsi_qp";
constexpr const char* kLibName = "libibverbs.so.1";

void DoctorUsage(FILE* out) {
  std::fprintf(out,
               "usage: softrnic doctor\n"
               "Checks this setup for softrnic and says how to fix what is wrong:\n"
               "  libibverbs     softrnic's libibverbs.so.1 is installed; which one programs\n"
               "                 started without `softrnic run` load\n"
               "  udp-port       UDP 4791 (SOFTRNIC_PORT) is free or held only by softrnic\n"
               "  shared-memory  /dev/shm and memfd shared mappings work (same-host path)\n"
               "  clock          CLOCK_MONOTONIC works, and its resolution\n"
               "  stale-files    files this user's killed softrnic processes left behind\n"
               "Changes nothing. Exit status: 0 if all is ok, 1 if a problem was found,\n"
               "2 on usage errors. See docs/user-guide.md, \"softrnic doctor\".\n");
}

struct Report {
  int problems = 0;
  void Ok(const char* check, const std::string& text) {
    std::printf("ok       %-14s %s\n", check, text.c_str());
  }
  void Problem(const char* check, const std::string& text, const std::string& fix) {
    ++problems;
    std::printf("PROBLEM  %-14s %s\n", check, text.c_str());
    std::printf("         %-14s fix: %s\n", "", fix.c_str());
  }
};

// Text from the system (paths, process names) goes to the terminal through
// Printable: no escape sequences.
using softrnic::tools::Printable;

std::string Errno(int err) { return std::strerror(err); }

// ---- libibverbs ----------------------------------------------------------

// The loader's cache (ldconfig -p): the first libibverbs.so.1 for this
// machine's ABI, "" if none (or no ldconfig).
std::string CachedLibrary() {
#if defined(__x86_64__)
  const char* abi = "x86-64";
#elif defined(__aarch64__)
  const char* abi = "AArch64";
#else
  const char* abi = "";
#endif
  FILE* p = popen("PATH=/sbin:/usr/sbin:/bin:/usr/bin ldconfig -p 2>/dev/null", "r");
  if (p == nullptr) return "";
  std::string found;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    const std::string l = line;
    const size_t arrow = l.find("=> ");
    if (l.find(std::string(kLibName) + " (") == std::string::npos || arrow == std::string::npos) continue;
    if (*abi && l.find(abi) == std::string::npos) continue;
    if (found.empty()) {
      found = l.substr(arrow + 3);
      while (!found.empty() && (found.back() == '\n' || found.back() == ' ')) found.pop_back();
    }
  }
  pclose(p);
  return found;
}

void CheckLibrary(Report& r) {
  const char* check = "libibverbs";
  const std::string self = SelfLibDir();
  const std::string self_lib = self + "/" + kLibName;
  if (self.empty() || FindDynamicSymbol(self_lib, kSoftrnicSymbol) != ElfSymbol::kDefined) {
    r.Problem(check, "softrnic's own " + std::string(kLibName) + " is missing from " + Printable(self) +
                         " (lib/softrnic beside this tool's bin, or lib of its build tree)",
              "reinstall softrnic (cmake --install, or the Debian package), or build the target "
              "softrnic_verbs_libs in this build tree");
    return;
  }
  // `softrnic run CMD` puts this directory first on LD_LIBRARY_PATH
  // (softrnic_run.cc), which is the documented way to start verbs programs
  // (docs/user-guide.md): that they would load another libibverbs.so.1
  // when started bare is a fact worth saying, not a problem.
  const std::string via_run = "`softrnic run CMD` loads softrnic's " + Printable(self_lib);
  const std::string to_load_bare = " (to start them without `softrnic run`: export LD_LIBRARY_PATH=" +
                                   Printable(self) + ")";
  // LD_LIBRARY_PATH in order, as ld.so: ':' or ';' separate entries, an
  // empty entry is the current directory; a file that is no loadable
  // library for this machine is skipped.
  const char* env = std::getenv("LD_LIBRARY_PATH");
  const std::string path = env ? env : "";
  size_t start = 0;
  while (env && start <= path.size()) {
    size_t end = path.find_first_of(":;", start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > start ? path.substr(start, end - start) : ".";
    start = end + 1;
    const std::string lib = dir + "/" + kLibName;
    const ElfSymbol s = FindDynamicSymbol(lib, kSoftrnicSymbol);
    if (s == ElfSymbol::kNotLoadable) continue;
    if (s == ElfSymbol::kDefined) {
      char real_lib[4096], real_self[4096];
      const bool same = realpath(lib.c_str(), real_lib) && realpath(self_lib.c_str(), real_self) &&
                        std::strcmp(real_lib, real_self) == 0;
      r.Ok(check, "verbs programs started from here load softrnic's " + Printable(lib) +
                      " (first on LD_LIBRARY_PATH)" +
                      (same ? "" : "; note: another softrnic than this tool's " + Printable(self)));
      return;
    }
    // Another library first. If a softrnic one comes later on the path,
    // the user meant to load softrnic and it is shadowed: a problem.
    std::string shadowed;
    for (size_t at = start; at <= path.size();) {
      size_t stop = path.find_first_of(":;", at);
      if (stop == std::string::npos) stop = path.size();
      const std::string later = (stop > at ? path.substr(at, stop - at) : ".") + "/" + kLibName;
      at = stop + 1;
      if (FindDynamicSymbol(later, kSoftrnicSymbol) == ElfSymbol::kDefined) {
        shadowed = later;
        break;
      }
    }
    if (!shadowed.empty()) {
      r.Problem(check, "verbs programs started from here would load " + Printable(lib) +
                           ", which is not softrnic's (no " + kSoftrnicSymbol +
                           "): it comes first on LD_LIBRARY_PATH, ahead of softrnic's " +
                           Printable(shadowed),
                "start verbs programs with `softrnic run CMD`, or export LD_LIBRARY_PATH=" +
                    Printable(self) + " (softrnic's lib directory first, ahead of " + Printable(dir) +
                    ")");
    } else {
      r.Ok(check, via_run + "; programs started without it load " + Printable(lib) +
                      ", which is not softrnic's (first on LD_LIBRARY_PATH)" + to_load_bare);
    }
    return;
  }
  const std::string system = CachedLibrary();
  if (!system.empty() && FindDynamicSymbol(system, kSoftrnicSymbol) == ElfSymbol::kDefined) {
    r.Ok(check, "verbs programs started from here load softrnic's " + Printable(system) +
                    " (from the loader's cache, ldconfig)");
    return;
  }
  r.Ok(check, via_run + "; programs started without it load " +
                  (system.empty() ? std::string("no libibverbs.so.1 at all")
                                  : "the system's " + Printable(system) + " (rdma-core)") +
                  to_load_bare);
}

// ---- UDP port ------------------------------------------------------------

std::string Holder(const UdpHolder& h, uint16_t port) {
  std::string s = (h.ipv6 ? "[" + h.address + "]" : h.address) + ":" + std::to_string(port) + " by " +
                  DescribeUid(h.uid);
  if (h.pid) s += ", pid " + std::to_string(h.pid) + " (" + Printable(h.comm) + ")";
  return s;
}

void CheckUdpPort(Report& r) {
  const char* check = "udp-port";
  const transport::UdpConfig cfg = transport::UdpConfigFromEnvironment(config::Environment::FromProcess());
  const uint16_t port = cfg.port;
  const std::string p = std::to_string(port);
  if (port == 0) {
    r.Ok(check, "SOFTRNIC_PORT=0: the kernel picks a free port per socket (tests only; real RoCE "
                "peers send to 4791)");
    return;
  }
  const std::string how = "softrnic binds every host IPv4 address and a per-process 127.a.b.c at UDP " + p +
                          " (docs/addressing.md)";
  // A plain wildcard bind fails if anything holds the port on any address.
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(port);
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  const int rc = fd >= 0 ? bind(fd, reinterpret_cast<const sockaddr*>(&any), sizeof any) : -1;
  const int err = errno;
  if (fd >= 0) close(fd);
  if (rc == 0) {
    r.Ok(check, "UDP " + p + " is free on every address; " + how);
    return;
  }
  if (err != EADDRINUSE) {
    r.Problem(check, "cannot bind UDP " + p + " on 0.0.0.0: " + Errno(err),
              "softrnic needs UDP sockets at port " + p + " (" + how +
                  "); allow them, or choose another port with SOFTRNIC_PORT (softrnic peers only)");
    return;
  }
  const std::vector<UdpHolder> holders = UdpPortHolders(port);
  std::vector<std::string> blocking, foreign, softrnic;
  for (const UdpHolder& h : holders) {
    if (h.wildcard) blocking.push_back(Holder(h, port));
    else if (h.softrnic_claim) softrnic.push_back(Holder(h, port));
    else if (!h.loopback && !h.ipv6) foreign.push_back(Holder(h, port));
  }
  // A device has two sockets per address (device port, reply): named once.
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
      if (std::find(v.begin(), v.begin() + long(i), v[i]) == v.begin() + long(i)) s += (s.empty() ? "" : "; ") + v[i];
    return s;
  };
  const std::string other_port = "or give softrnic another port with SOFTRNIC_PORT=<port> in every "
                                 "softrnic process (then only softrnic peers reach it: RoCE sends to 4791)";
  if (!blocking.empty()) {
    r.Problem(check,
              "UDP " + p + " is held on the wildcard address: " + join(blocking) +
                  ". Every bind softrnic makes at port " + p + " fails (EADDRINUSE), so a device cannot open",
              "stop that program (if no process is named, it may be the rdma_rxe kernel module: "
                  "`rdma link show`, then `rdma link delete <rxe link>`), " +
                  other_port);
    return;
  }
  if (!foreign.empty()) {
    r.Problem(check,
              "UDP " + p + " is held on a host address by a program that is not softrnic: " + join(foreign) +
                  ". Remote peers sending to that address reach it, not softrnic",
              "stop that program, or bind softrnic to another address with SOFTRNIC_BIND=<ip> "
              "(docs/addressing.md), " + other_port);
    return;
  }
  if (holders.empty()) {
    r.Problem(check, "cannot bind UDP " + p + " on 0.0.0.0 (EADDRINUSE), and /proc/net/udp shows no holder",
              "find the holder with `ss -uapn 'sport = :" + p + "'`, " + other_port);
    return;
  }
  r.Ok(check, "UDP " + p + " is held only by softrnic devices" +
                  (softrnic.empty() ? std::string(" and on loopback addresses") : ": " + join(softrnic)) +
                  "; a new device gets its own 127.a.b.c:" + p + " and every host address still free");
}

// ---- shared memory -------------------------------------------------------

void CheckSharedMemory(Report& r) {
  const char* check = "shared-memory";
  const std::string fallback = "or run with SOFTRNIC_TRANSPORT=udp (same-host traffic then goes over UDP, slower)";
  struct stat st;
  if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode)) {
    r.Problem(check, "/dev/shm is missing: softrnic keeps its endpoint links and counters there",
              "mount a tmpfs: `mount -t tmpfs -o mode=1777 tmpfs /dev/shm`, " + fallback);
    return;
  }
  char probe[] = "/dev/shm/softrnic-doctor-XXXXXX";
  const int pfd = mkstemp(probe);
  if (pfd < 0) {
    r.Problem(check, std::string("cannot create a file in /dev/shm: ") + Errno(errno),
              "make /dev/shm writable for every user (mode 1777, a tmpfs that is not read-only), " + fallback);
    return;
  }
  close(pfd);
  unlink(probe);
  const std::string ep = transport::ShmEndpointDirectory();
  if (lstat(ep.c_str(), &st) == 0) {
    const transport::OwnedDir dir = transport::OwnedDir::Open(ep, /*create=*/false, /*private_dir=*/true);
    if (!dir.ok()) {
      r.Problem(check, Printable(ep) + " (this user's endpoint links) is refused: " + Printable(dir.why()) +
                           "; same-host peers are then reached over UDP",
                "remove it (root: `rm -rf " + Printable(ep) + "`; softrnic recreates it as a 0700 directory)");
      return;
    }
  }
  // What the transport does (shm_segment.cc): a sealed memfd, mapped shared;
  // a peer opens it through the /proc/<pid>/fd link and maps it too.
  constexpr size_t kSize = 1 << 20;
  const int fd = memfd_create("softrnic-doctor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    r.Problem(check, std::string("memfd_create: ") + Errno(errno) + " (a seccomp filter or an old kernel)",
              "allow memfd_create (Linux 3.17+; container seccomp profiles), " + fallback);
    return;
  }
  std::string what;
  void* a = MAP_FAILED;
  void* b = MAP_FAILED;
  int peer = -1;
  if (ftruncate(fd, kSize) != 0) what = "ftruncate";
  else if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) what = "F_ADD_SEALS";
  else if ((a = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) what = "mmap";
  else if ((peer = open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR | O_CLOEXEC)) < 0)
    what = "opening the memfd through /proc/self/fd";
  else if ((b = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, peer, 0)) == MAP_FAILED)
    what = "mmap of the reopened memfd";
  const int err = errno;
  bool shared = false;
  if (what.empty()) {
    static_cast<volatile char*>(a)[kSize - 1] = 42;
    shared = static_cast<volatile char*>(b)[kSize - 1] == 42;
  }
  if (a != MAP_FAILED) munmap(a, kSize);
  if (b != MAP_FAILED) munmap(b, kSize);
  if (peer >= 0) close(peer);
  close(fd);
  if (!what.empty()) {
    r.Problem(check, what + " failed on a memfd: " + Errno(err),
              "same-host peers map each other's memfds (docs/shm.md): allow it (is /proc mounted? a "
              "memory limit?), " + fallback);
    return;
  }
  if (!shared) {
    r.Problem(check, "two shared mappings of one memfd do not see the same memory", fallback);
    return;
  }
  struct statvfs vfs;
  std::string space;
  if (statvfs("/dev/shm", &vfs) == 0)
    space = ", " + std::to_string(uint64_t(vfs.f_bavail) * vfs.f_frsize >> 20) + " MiB free in /dev/shm";
  r.Ok(check, "/dev/shm is writable, sealed memfds map shared and reopen through /proc" + space);
}

// ---- clock -----------------------------------------------------------------

void CheckClock(Report& r) {
  const char* check = "clock";
  timespec res{}, t1{}, t2{};
  if (clock_getres(CLOCK_MONOTONIC, &res) != 0 || clock_gettime(CLOCK_MONOTONIC, &t1) != 0 ||
      clock_gettime(CLOCK_MONOTONIC, &t2) != 0) {
    r.Problem(check, std::string("CLOCK_MONOTONIC does not work: ") + Errno(errno),
              "softrnic's timers (retransmission, delayed ACKs) need it: run on a Linux kernel that has it");
    return;
  }
  std::string source;
  if (FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f)) source = buf;
    std::fclose(f);
    while (!source.empty() && source.back() == '\n') source.pop_back();
  }
  const long long res_ns = res.tv_sec * 1000000000LL + res.tv_nsec;
  const std::string text = "CLOCK_MONOTONIC resolution " + std::to_string(res_ns) + " ns" +
                           (source.empty() ? "" : ", clock source " + Printable(source));
  const bool backwards = t2.tv_sec < t1.tv_sec || (t2.tv_sec == t1.tv_sec && t2.tv_nsec < t1.tv_nsec);
  if (backwards) {
    r.Problem(check, text + ": it went backwards", "report this kernel bug; softrnic's timers rely on it");
  } else if (res_ns > 100000) {
    // Without high-resolution timers it is a scheduler tick (1-10 ms).
    r.Problem(check, text + ": coarser than 100 us, so delayed ACKs and retransmission timers are late",
              "use a kernel with high-resolution timers (CONFIG_HIGH_RES_TIMERS, not booted with highres=off)");
  } else {
    r.Ok(check, text);
  }
}

// ---- stale files -----------------------------------------------------------

void CheckStaleFiles(Report& r) {
  const std::string dir = engine::StatsPublisher::Directory();
  const int stats = engine::SweepStaleStatsFiles(dir, /*dry_run=*/true);
  const int links = transport::ShmSweepStaleLinks(/*dry_run=*/true);
  if (stats + links == 0) {
    r.Ok("stale-files", "none of this user's dead processes left files in " + Printable(dir) + " or " +
                            Printable(transport::ShmEndpointDirectory()));
    return;
  }
  // Harmless (readers skip them) and removed by the next device or
  // `softrnic stat`: reported, not a problem.
  r.Ok("stale-files", std::to_string(stats) + " stats file(s) in " + Printable(dir) + " and " +
                          std::to_string(links) + " endpoint link(s) of this user's dead processes "
                          "(killed with SIGKILL); harmless: `softrnic stat` or the next device removes them");
}

}  // namespace

// argv[0] is "doctor" (main in softrnic.cc dispatches here).
int DoctorMain(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      DoctorUsage(stdout);
      return 0;
    }
    std::fprintf(stderr, "softrnic doctor: unknown argument '%s'\n", a.c_str());
    DoctorUsage(stderr);
    return 2;
  }
  Report r;
  CheckLibrary(r);
  CheckUdpPort(r);
  CheckSharedMemory(r);
  CheckClock(r);
  CheckStaleFiles(r);
  std::fflush(stdout);
  return r.problems ? 1 : 0;
}

}  // namespace softrnic::tools
