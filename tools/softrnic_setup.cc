// `softrnic setup [--remove]` (root): the device files `softrnic run` gives
// one command, for the whole system (a container, a CI machine):
//
//   /dev/infiniband/uverbs0, rdma_cm   character devices 1:3 (what /dev/null
//                                      is), mode 0666; a bind mount of
//                                      /dev/null where mknod is refused
//   /sys/class/infiniband/softrnic0/   a read-only tmpfs on
//                                      /sys/class/infiniband with the rendered
//                                      tree (device_view.h), for no process in
//                                      particular: host GIDs only
//
// A directory cannot be created in sysfs, and /sys/class cannot be overlaid
// for everyone (its entries' symlinks and new devices would break), so when
// /sys/class/infiniband does not exist (the kernel's ib_core is not loaded)
// only /dev is set up, and the message says so.
//
//   root's softrnic-nicd               the host NIC daemon of this network
//                                      namespace, run with --stay: it owns
//                                      UDP 4791 at the host's addresses and
//                                      serves every user's processes there
//                                      (docs/host-nic.md, "Users"), so no
//                                      user's own nicd takes the port first
//
// What was done is recorded in /run/softrnic/setup.state, one action per
// line; running setup again re-renders sysfs (addresses change) and creates
// only what is missing; --remove undoes exactly the recorded actions, newest
// first, and leaves anything it did not create alone.
//
// Exit status: 0 done, 2 on failure (the message names the step and errno).
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "commands.h"
#include "device_view.h"
#include "engine/device_identity.h"
#include "mounts.h"
#include "self_lib_dir.h"
#include "transport/host_nic/protocol.h"

namespace softrnic::tools {
namespace {

constexpr const char* kStateDir = "/run/softrnic";
constexpr const char* kStateFile = "/run/softrnic/setup.state";
constexpr const char* kDevDir = "/dev/infiniband";
constexpr const char* kSysfsDir = "/sys/class/infiniband";
constexpr long kTmpfsMagic = 0x01021994;

constexpr uint16_t kRocePort = 4791;

void SetupUsage(FILE* out) {
  std::fprintf(out,
               "usage: softrnic setup [--remove]\n"
               "As root: creates /dev/infiniband/%s and rdma_cm (character devices 1:3) and,\n"
               "if /sys/class/infiniband exists, mounts a read-only tmpfs on it holding\n"
               "%s's attributes, GIDs and port as the kernel's sysfs shows an RDMA device;\n"
               "starts root's host NIC daemon (softrnic-nicd --stay) for this network\n"
               "namespace, which serves every user's processes at the host's addresses.\n"
               "Running it again refreshes the GIDs. --remove undoes exactly what setup did\n"
               "(recorded in %s). Without root, use `softrnic run CMD`.\n",
               engine::kUverbsName, engine::kDeviceName, kStateFile);
}


// "ACTION PATH" lines: mkdir, mknod, bind (a file with /dev/null bound on
// it), mount (our tmpfs).
struct Action {
  std::string kind;
  std::string path;
  bool operator==(const Action&) const = default;
};

std::vector<Action> LoadState() {
  std::vector<Action> actions;
  std::ifstream in(kStateFile);
  std::string kind, path;
  while (in >> kind >> path) actions.push_back({kind, path});
  return actions;
}

bool SaveState(const std::vector<Action>& actions) {
  if (actions.empty()) {
    if (unlink(kStateFile) != 0 && errno != ENOENT) return false;
    rmdir(kStateDir);  // ours; kept if something else uses it
    return true;
  }
  mkdir(kStateDir, 0755);
  std::ofstream out(kStateFile, std::ios::trunc);
  for (const Action& a : actions) out << a.kind << " " << a.path << "\n";
  return static_cast<bool>(out.flush());
}

bool Has(const std::vector<Action>& actions, const Action& a) {
  return std::find(actions.begin(), actions.end(), a) != actions.end();
}

bool IsOurTmpfs(const std::string& path) {
  struct statfs fs;
  return statfs(path.c_str(), &fs) == 0 && fs.f_type == kTmpfsMagic;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "softrnic setup: %s\n", what.c_str());
  return 2;
}

// The pid of the process listening on root's nicd name for `port` in this
// network namespace, or -1 (SO_PEERCRED of a connection to it).
pid_t RootNicdPid(uint16_t port) {
  const int fd =
      transport::host_nic::ConnectControlSocket(transport::host_nic::ControlSocketName(0, port));
  if (fd < 0) return -1;
  pid_t pid = -1;
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 && cred.uid == 0)
    pid = cred.pid;
  close(fd);  // nicd sees an EOF from a client that never said Hello
  return pid;
}

bool IsNicd(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return std::getline(comm, name) && name == "softrnic-nicd";
}

// Root's nicd for this network namespace (docs/host-nic.md, "Users"). Not
// fatal when it cannot start: the device files are set up regardless.
void StartNicd(std::vector<Action>* actions) {
  const std::string port = std::to_string(kRocePort);
  if (RootNicdPid(kRocePort) > 0) {
    std::printf("root's host NIC daemon already runs for UDP %s%s\n", port.c_str(),
                Has(*actions, {"nicd", port}) ? "" : " (not started by softrnic setup: left as is)");
    return;
  }
  const std::string lib = SelfLibDir();
  const std::string path = lib + "/softrnic-nicd";
  if (lib.empty() || access(path.c_str(), X_OK) != 0) {
    std::printf("no softrnic-nicd beside the libraries (%s): root's host NIC daemon not started;\n"
                "each user's first process starts its own, serving that user only\n",
                path.c_str());
    return;
  }
  std::string arg0 = "softrnic-nicd", arg1 = "--port", arg3 = "--stay";
  std::string port_arg = port;
  char* argv[] = {arg0.data(), arg1.data(), port_arg.data(), arg3.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t child = -1;
  if (const int err = posix_spawn(&child, path.c_str(), nullptr, nullptr, argv, envp)) {
    std::printf("cannot start %s: %s\n", path.c_str(), std::strerror(err));
    return;
  }
  // nicd detaches: its first process exits once the control socket listens.
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  // It listens once detached (softrnic_nicd.cc): a moment later.
  pid_t pid = -1;
  for (int i = 0; i < 300 && (pid = RootNicdPid(kRocePort)) <= 0; ++i) usleep(10000);
  if (pid <= 0) {
    std::printf("root's host NIC daemon did not come up (%s exited with %d)\n", path.c_str(),
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return;
  }
  if (!Has(*actions, {"nicd", port})) actions->push_back({"nicd", port});
  std::printf("started root's host NIC daemon for UDP %s (pid %d): every user's processes are\n"
              "reached at the host's addresses\n",
              port.c_str(), static_cast<int>(pid));
}

// Stops root's nicd of `port` if one runs (SIGTERM: it closes its groups).
std::string StopNicd(const std::string& port) {
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535) return "bad port in the state file: " + port;
  const pid_t pid = RootNicdPid(static_cast<uint16_t>(p));
  if (pid <= 0 || !IsNicd(pid)) return "";  // gone already
  if (kill(pid, SIGTERM) != 0) return "cannot stop nicd " + std::to_string(pid) + ": " + std::strerror(errno);
  for (int i = 0; i < 200 && kill(pid, 0) == 0; ++i) usleep(10000);
  return "";
}

int Remove() {
  std::vector<Action> actions = LoadState();
  if (actions.empty()) {
    std::printf("softrnic setup --remove: nothing to remove (no %s)\n", kStateFile);
    return 0;
  }
  int rc = 0;
  while (!actions.empty()) {
    const Action a = actions.back();
    std::string err;
    if (a.kind == "nicd") {
      err = StopNicd(a.path);
    } else if (a.kind == "mount") {
      if (IsOurTmpfs(a.path) && umount2(a.path.c_str(), MNT_DETACH) != 0)
        err = "cannot unmount " + a.path + ": " + std::strerror(errno);
    } else if (a.kind == "bind") {
      umount2(a.path.c_str(), MNT_DETACH);
      if (unlink(a.path.c_str()) != 0 && errno != ENOENT)
        err = "cannot remove " + a.path + ": " + std::strerror(errno);
    } else if (a.kind == "mknod") {
      if (unlink(a.path.c_str()) != 0 && errno != ENOENT)
        err = "cannot remove " + a.path + ": " + std::strerror(errno);
    } else if (a.kind == "mkdir") {
      if (rmdir(a.path.c_str()) != 0 && errno != ENOENT)
        err = "cannot remove " + a.path + ": " + std::strerror(errno) +
              (errno == ENOTEMPTY ? " (something else put files there; left as is)" : "");
    }
    if (!err.empty()) {
      std::fprintf(stderr, "softrnic setup --remove: %s\n", err.c_str());
      rc = 2;
      break;
    }
    if (a.kind == "nicd")
      std::printf("stopped root's host NIC daemon for UDP %s\n", a.path.c_str());
    else
      std::printf("removed %s%s\n", a.path.c_str(), a.kind == "mount" ? " (tmpfs)" : "");
    actions.pop_back();
  }
  if (!SaveState(actions)) return Fail(std::string("cannot write ") + kStateFile);
  return rc;
}

// /dev/infiniband/NAME: a character device 1:3, or /dev/null bound onto a
// file where mknod is refused (a user-namespaced container).
std::string MakeNode(const std::string& path, std::vector<Action>* actions) {
  if (Exists(path)) {
    std::printf("%s exists%s\n", path.c_str(),
                Has(*actions, {"mknod", path}) || Has(*actions, {"bind", path})
                    ? ""
                    : " (not created by softrnic setup: left as is)");
    return "";
  }
  // The mode exactly as given, whatever the umask, without a chmod by path
  // afterwards (docs/security.md: nothing chmods by path).
  const mode_t old_umask = umask(0);
  const int made = mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3));
  umask(old_umask);
  if (made == 0) {
    actions->push_back({"mknod", path});
    std::printf("created %s (character device 1:3)\n", path.c_str());
    return "";
  }
  const int mknod_errno = errno;
  if (std::string e = BindDevNull(path); !e.empty()) {
    unlink(path.c_str());
    return "cannot create " + path + ": mknod: " + std::strerror(mknod_errno) + "; " + e;
  }
  actions->push_back({"bind", path});
  std::printf("created %s (/dev/null bound on it; mknod: %s)\n", path.c_str(),
              std::strerror(mknod_errno));
  return "";
}

int Setup() {
  std::vector<Action> actions = LoadState();
  auto save = [&] { return SaveState(actions); };
  if (!IsDir(kDevDir)) {
    if (mkdir(kDevDir, 0755) != 0)
      return Fail(std::string("cannot create ") + kDevDir + ": " + std::strerror(errno));
    actions.push_back({"mkdir", kDevDir});
  }
  for (const char* name : {engine::kUverbsName, "rdma_cm"}) {
    if (std::string e = MakeNode(std::string(kDevDir) + "/" + name, &actions); !e.empty()) {
      save();
      return Fail(e);
    }
  }
  StartNicd(&actions);
  if (!IsDir(kSysfsDir)) {
    if (!save()) return Fail(std::string("cannot write ") + kStateFile);
    std::printf(
        "%s does not exist (the kernel's ib_core module is not loaded) and cannot be created in\n"
        "sysfs: only /dev was set up. Programs that read sysfs (UCX, NCCL, pyverbs's tests) need\n"
        "`softrnic run CMD`, or load ib_core on the host (modprobe ib_core) and run setup again.\n",
        kSysfsDir);
    return 0;
  }
  // Re-render: a fresh tmpfs replaces the one an earlier setup mounted.
  const Action sysfs{"mount", kSysfsDir};
  if (Has(actions, sysfs) && IsOurTmpfs(kSysfsDir)) umount2(kSysfsDir, MNT_DETACH);
  // Mounted in place (not staged and moved: the host's mounts are shared,
  // and a mount cannot be moved from under a shared one); the tree is
  // complete a few milliseconds later.
  if (std::string e = MountTmpfs(kSysfsDir, MS_NOEXEC | MS_NODEV); !e.empty()) {
    save();
    return Fail(e);
  }
  if (!Has(actions, sysfs)) actions.push_back(sysfs);
  const DeviceFacts facts = CurrentFacts(std::nullopt);
  if (std::string e = FillSysfs(kSysfsDir, RenderSysfs(facts)); !e.empty()) {
    save();
    return Fail(e);
  }
  if (!save()) return Fail(std::string("cannot write ") + kStateFile);
  std::printf("mounted %s/%s (%zu GIDs: the host's addresses; a process's own loopback GID "
              "is not shown)\n",
              kSysfsDir, engine::kDeviceName, facts.gids.size());
  return 0;
}

}  // namespace

int SetupMain(int argc, char** argv) {
  bool remove = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--remove") {
      remove = true;
    } else if (a == "-h" || a == "--help") {
      SetupUsage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "softrnic setup: unknown argument '%s'\n", a.c_str());
      SetupUsage(stderr);
      return 2;
    }
  }
  if (geteuid() != 0)
    return Fail(
        "must be run as root (it changes /dev and /sys for the whole system).\n"
        "  Without root, `softrnic run CMD` gives CMD the same files privately.");
  return remove ? Remove() : Setup();
}

}  // namespace softrnic::tools
