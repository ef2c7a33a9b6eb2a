// `softrnic run [--] CMD [ARGS...]`: runs CMD with softrnic's libraries and
// a private view of the device environment middleware looks for
// (docs/user-guide.md, "Middleware: the device environment"):
//
//   LD_LIBRARY_PATH   softrnic's lib dir (`lib/softrnic` beside this tool's
//                     `bin` when installed, `lib` in a build tree) prepended,
//                     so verbs programs load softrnic's libibverbs
//   /dev/infiniband/  uverbs0 and rdma_cm: /dev/null bound onto them, a
//                     character device anyone can open read-write (UCX's
//                     uct_ib_device_is_accessible checks /dev/infiniband/
//                     <ibv_device->dev_name> with access(R_OK|W_OK))
//   /sys/class/infiniband/softrnic0/   the device as ib_core's sysfs shows a
//                     kernel device (device_view.h), rendered for this
//                     process's pid, which CMD keeps; its port counter files
//                     (ports/1/counters, hw_counters) kept live by a small
//                     updater process while CMD runs (counter_updater.h)
//
// The view lives in a mount namespace of its own (for a non-root caller
// inside a user namespace mapping only the caller's uid and gid, so CMD runs
// with the caller's identity and no privilege), which CMD and everything it
// starts inherit; the host sees nothing. Where /dev/infiniband does not
// exist, /dev becomes a tmpfs holding bind mounts of every entry of the real
// /dev (so /dev/null, /dev/pts, /dev/shm... are the host's own) plus
// infiniband/; likewise /sys/class when /sys/class/infiniband does not exist.
// Everything is assembled in a mkdtemp staging directory and moved into
// place (MS_MOVE), and the staging directory is removed before CMD starts.
//
// Exit status: CMD's; 127 if CMD is not found, 126 if it cannot be executed,
// 2 if the environment cannot be set up (the message says what to do).
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "config/environment.h"
#include "counter_updater.h"
#include "device_view.h"
#include "engine/observe/stats_publisher.h"
#include "engine/device_identity.h"
#include "mounts.h"
#include "faults/scenario_parse.h"
#include "self_lib_dir.h"
#include "shared_userns.h"

namespace softrnic::tools {
namespace {

constexpr int kSetupFailed = 2;
constexpr const char* kHostDev = ".softrnic-host-dev";

void RunUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: softrnic run [--faults FAULTS] [--trace PATH] [--] CMD [ARGS...]\n"
      "Runs CMD with softrnic's libraries (LD_LIBRARY_PATH) and a private view of\n"
      "/dev/infiniband/%s and /sys/class/infiniband/%s, as a kernel RDMA device\n"
      "would have, for middleware that checks them (UCX, NCCL, libfabric, pyverbs).\n"
      "Needs root or unprivileged user namespaces; nothing changes outside CMD.\n"
      "  --faults FAULTS  network faults for CMD's devices: a one-line scenario\n"
      "                   (drop=0.01,seed=7; nth=5,drop=1; outage=2s+300ms; ...) or a\n"
      "                   scenario file (*.toml); checked first: an error runs nothing\n"
      "  --trace PATH     each device's per-QP event trace (%%p: the pid), Perfetto /\n"
      "                   chrome://tracing JSON, and PATH.txt, a summary per QP\n"
      "                   (docs/fault-lab.md)\n"
      "Exit status: CMD's; 127 if CMD is not found; 2 if the view cannot be set up\n"
      "or the faults have an error.\n"
      "See docs/user-guide.md, \"Middleware: the device environment\".\n",
      engine::kUverbsName, engine::kDeviceName);
}

// What went wrong, errno text included, and what to do about it.
struct Failure {
  std::string what;
  std::string hint;
};

const char* kUsernsHint =
    "unprivileged user namespaces are disabled or restricted here. Either enable them\n"
    "  (sysctl -w kernel.unprivileged_userns_clone=1 on Debian kernels, sysctl -w\n"
    "  user.max_user_namespaces=15000, sysctl -w kernel.apparmor_restrict_unprivileged_userns=0\n"
    "  on Ubuntu 24.04, or a container seccomp profile allowing unshare), or have root run\n"
    "  `softrnic setup` once and start the program directly with LD_LIBRARY_PATH set to\n"
    "  softrnic's lib directory.";

bool WriteFile(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  close(fd);
  errno = saved;
  return ok;
}

// A mount namespace of our own; for a non-root caller inside a user
// namespace mapping exactly the caller's uid and gid: a running `softrnic
// run`'s, or a new one (setgroups denied first, as the kernel requires for
// an unprivileged gid_map). Root keeps
// real root: only the mount namespace, so `ip netns`, raw sockets etc. work.
bool EnterNamespaces(Failure* f) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (uid == 0) {
    if (unshare(CLONE_NEWNS) == 0) return true;
    if (errno != EPERM) {
      *f = {std::string("cannot create a mount namespace: ") + std::strerror(errno), ""};
      return false;
    }
    // Root without CAP_SYS_ADMIN (a container): try a user namespace as
    // an unprivileged caller would.
  }
  // Another `softrnic run` of ours is running: share its user namespace,
  // so that our processes and its reach each other through shared memory
  // (shared_userns.h). Its maps are already ours.
  if (JoinRunningUserNamespace(uid, gid) != 0) {
    if (unshare(CLONE_NEWNS) == 0) return true;
    *f = {std::string("cannot create a mount namespace in the shared user namespace: ") +
              std::strerror(errno),
          kUsernsHint};
    return false;
  }
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    *f = {std::string("cannot create a user namespace: ") + std::strerror(errno), kUsernsHint};
    return false;
  }
  const std::string uid_map = std::to_string(uid) + " " + std::to_string(uid) + " 1\n";
  const std::string gid_map = std::to_string(gid) + " " + std::to_string(gid) + " 1\n";
  if (!WriteFile("/proc/self/setgroups", "deny") && errno != ENOENT) {
    *f = {std::string("cannot write /proc/self/setgroups: ") + std::strerror(errno), kUsernsHint};
    return false;
  }
  if (!WriteFile("/proc/self/uid_map", uid_map) || !WriteFile("/proc/self/gid_map", gid_map)) {
    *f = {std::string("cannot map the user and group ids into the user namespace: ") +
              std::strerror(errno),
          kUsernsHint};
    return false;
  }
  return true;
}

// Fills the tmpfs at `staging` with the entries of `real`: directories (and
// files, devices, sockets) as bind mounts of the originals with whatever is
// mounted below them, symlinks recreated. The copy is of the top level only;
// an entry added to the real directory later is not seen.
bool MirrorEntries(const std::string& real, const std::string& staging, Failure* f) {
  DIR* d = opendir(real.c_str());
  if (!d) {
    *f = {"cannot list " + real + ": " + std::strerror(errno), ""};
    return false;
  }
  bool ok = true;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string src = real + "/" + name, dst = staging + "/" + name;
    struct stat st;
    if (lstat(src.c_str(), &st) != 0) continue;  // vanished meanwhile
    std::string err;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = readlink(src.c_str(), target, sizeof(target) - 1);
      if (n < 0 || symlink(std::string(target, static_cast<size_t>(n)).c_str(), dst.c_str()) != 0)
        err = "cannot recreate the symlink " + src + ": " + std::strerror(errno);
    } else if (S_ISDIR(st.st_mode)) {
      if (mkdir(dst.c_str(), st.st_mode & 07777) != 0)
        err = "cannot create " + dst + ": " + std::strerror(errno);
      else
        err = BindMount(src, dst, true);
    } else {
      const int fd = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) {
        err = "cannot create " + dst + ": " + std::strerror(errno);
      } else {
        close(fd);
        err = BindMount(src, dst, false);
      }
    }
    if (!err.empty()) {
      *f = {err, ""};
      ok = false;
      break;
    }
  }
  closedir(d);
  return ok;
}

// Opening the /dev/ptmx character device finds its devpts instance as the
// "pts" mounted beside the ptmx it was opened through (the kernel's
// devpts_acquire / path_pts); a file bind mount of ptmx has no usable parent
// (open fails with ENOENT). So the view keeps the whole real /dev, with its
// submounts, at /dev/.softrnic-host-dev and /dev/ptmx is a symlink to the
// ptmx there: the host's device, its mode (0666), the host's devpts; a pty's
// path then reads /dev/.softrnic-host-dev/pts/N (ptsname() still says
// /dev/pts/N, the same device). /dev/pts/ptmx itself is usually mode 000, so
// a symlink to pts/ptmx would only work for root; and root, outside a user
// namespace, gets a real ptmx node in the tmpfs instead.
bool FixPtmx(const std::string& staging, Failure* f) {
  struct stat st;
  if (lstat("/dev/ptmx", &st) != 0 || !S_ISCHR(st.st_mode)) return true;  // a symlink: kept
  const std::string ptmx = staging + "/ptmx", host = staging + "/" + kHostDev;
  std::string e;
  if (umount2(ptmx.c_str(), MNT_DETACH) != 0 || unlink(ptmx.c_str()) != 0)
    e = "cannot replace " + ptmx + ": " + std::strerror(errno);
  // Root (no user namespace) can simply have the device node itself.
  // The host's mode exactly, whatever the umask, without a chmod by path.
  const mode_t old_umask = umask(0);
  const bool made = e.empty() && mknod(ptmx.c_str(), st.st_mode, st.st_rdev) == 0;
  umask(old_umask);
  if (made) return true;
  if (e.empty() && mkdir(host.c_str(), 0755) != 0)
    e = "cannot create " + host + ": " + std::strerror(errno);
  if (e.empty()) e = BindMount("/dev", host, true);
  if (e.empty() && symlink((std::string(kHostDev) + "/ptmx").c_str(), ptmx.c_str()) != 0)
    e = "cannot create the symlink " + ptmx + ": " + std::strerror(errno);
  if (!e.empty()) *f = {e, ""};
  return e.empty();
}

// /dev/infiniband/{uverbs0,rdma_cm} under `dir` (a fresh tmpfs or a
// directory in one).
bool AddUverbs(const std::string& dir, Failure* f) {
  for (const char* name : {engine::kUverbsName, "rdma_cm"}) {
    if (std::string e = BindDevNull(dir + "/" + std::string(name)); !e.empty()) {
      *f = {e, ""};
      return false;
    }
  }
  return true;
}

// Builds one overlay in the tmpfs on `staging` and moves it onto its place.
// /dev: a tmpfs on /dev/infiniband if that exists, else on /dev itself.
bool SetUpDev(const std::string& staging, Failure* f) {
  std::string target = "/dev/infiniband";
  if (std::string e = MountTmpfs(staging, 0); !e.empty()) {
    *f = {e, ""};
    return false;
  }
  if (IsDir("/dev/infiniband")) {
    if (!AddUverbs(staging, f)) return false;
  } else {
    target = "/dev";
    if (!MirrorEntries("/dev", staging, f)) return false;
    if (!FixPtmx(staging, f)) return false;
    if (mkdir((staging + "/infiniband").c_str(), 0755) != 0) {
      *f = {"cannot create " + staging + "/infiniband: " + std::strerror(errno), ""};
      return false;
    }
    if (!AddUverbs(staging + "/infiniband", f)) return false;
  }
  if (std::string e = MoveMount(staging, target); !e.empty()) {
    *f = {e, ""};
    return false;
  }
  return true;
}

// Where the counter updater writes (counter_updater.h): a descriptor of a
// second, writable mount of the view's tmpfs, and the port's directory
// relative to it.
struct CounterTarget {
  int root_fd = -1;
  std::string port_dir;
};

// A bind mount of `staging` in a fresh temporary directory, opened, then
// detached from the namespace (MNT_DETACH) and its directory removed: the
// mount lives on through the descriptor alone, so only the holder of the
// descriptor can write the view, and nothing of it is left anywhere.
int DetachedWritableMount(const std::string& staging, Failure* f) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp && IsDir(tmp) ? tmp : "/tmp") + "/softrnic-rw.XXXXXX";
  if (!mkdtemp(dir.data())) {
    *f = {"cannot create a directory " + dir + ": " + std::strerror(errno), ""};
    return -1;
  }
  int fd = -1;
  if (std::string e = BindMount(staging, dir, false); !e.empty()) {
    *f = {e, ""};
  } else {
    fd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) *f = {"cannot open " + dir + ": " + std::strerror(errno), ""};
    umount2(dir.c_str(), MNT_DETACH);
  }
  rmdir(dir.c_str());
  return fd;
}

// /sys/class/infiniband: a tmpfs there if the directory exists (the kernel's
// ib_core is loaded), else a tmpfs on /sys/class with bind mounts of every
// class plus infiniband/. The view's mount is read-only; `counters` gets
// a writable way in for the counter updater.
bool SetUpSysfs(const std::string& staging, const std::vector<TreeNode>& tree,
                CounterTarget* counters, Failure* f) {
  const unsigned long flags = MS_NOEXEC | MS_NODEV;
  std::string target = "/sys/class/infiniband";
  std::string root = staging;
  if (std::string e = MountTmpfs(staging, flags); !e.empty()) {
    *f = {e, ""};
    return false;
  }
  if (!IsDir(target)) {
    target = "/sys/class";
    if (!MirrorEntries("/sys/class", staging, f)) return false;
    root = staging + "/infiniband";
    if (mkdir(root.c_str(), 0755) != 0) {
      *f = {"cannot create " + root + ": " + std::strerror(errno), ""};
      return false;
    }
  }
  std::string e = WriteTree(root, tree);
  if (!e.empty()) {
    *f = {e, ""};
    return false;
  }
  counters->port_dir = (root == staging ? "" : "infiniband/") + std::string(engine::kDeviceName) + "/ports/1";
  counters->root_fd = DetachedWritableMount(staging, f);
  if (counters->root_fd < 0) return false;
  e = RemountMountReadOnly(staging, flags);
  if (e.empty()) e = MoveMount(staging, target);
  if (!e.empty()) {
    *f = {e, ""};
    return false;
  }
  return true;
}

// Mounts the view. On failure the staging directory is unmounted and
// removed, so nothing is left behind in any case.
bool SetUpView(const std::vector<TreeNode>& tree, CounterTarget* counters, Failure* f) {
  // Nothing we mount may propagate back to the host's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    *f = {std::string("cannot make the mounts private: ") + std::strerror(errno), ""};
    return false;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp && IsDir(tmp) ? tmp : "/tmp") + "/softrnic-run.XXXXXX";
  if (!mkdtemp(templ.data())) {
    *f = {"cannot create a staging directory " + templ + ": " + std::strerror(errno),
          "set TMPDIR to a writable directory."};
    return false;
  }
  const std::string staging = templ;
  bool ok = SetUpDev(staging, f);
  if (ok) ok = SetUpSysfs(staging, tree, counters, f);
  // After a successful MS_MOVE nothing is mounted on the staging directory;
  // after a failure the half-built tmpfs is.
  umount2(staging.c_str(), MNT_DETACH);
  rmdir(staging.c_str());
  return ok;
}

// --faults: a scenario file (an existing file ending in .toml) or the
// one-line form, checked here so that a scenario with an error runs
// nothing, then handed to CMD's devices through the environment.
bool SetFaults(const std::string& text) {
  struct stat st{};
  const bool is_file = text.size() > 5 && text.compare(text.size() - 5, 5, ".toml") == 0 &&
                       stat(text.c_str(), &st) == 0;
  const faults::ParseResult r = is_file ? faults::ParseScenarioFile(text) : faults::ParseOneLine(text);
  if (!r.ok) {
    std::fprintf(stderr, "softrnic run: --faults: %s\nnothing was run\n", r.error.c_str());
    return false;
  }
  unsetenv(is_file ? "SOFTRNIC_FAULTS" : "SOFTRNIC_FAULTS_FILE");
  setenv(is_file ? "SOFTRNIC_FAULTS_FILE" : "SOFTRNIC_FAULTS", text.c_str(), 1);
  return true;
}

}  // namespace

int RunMain(int argc, char** argv) {
  int i = 1;  // argv[0] is "run"
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      RunUsage(stdout);
      return 0;
    }
    if ((a == "--faults" || a == "--trace") && i + 1 >= argc) {
      std::fprintf(stderr, "softrnic run: %s needs a value\n", a.c_str());
      return kSetupFailed;
    }
    if (a == "--faults") {
      if (!SetFaults(argv[++i])) return kSetupFailed;
      continue;
    }
    if (a == "--trace") {
      setenv("SOFTRNIC_TRACE", argv[++i], 1);
      continue;
    }
    if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "softrnic run: unknown option '%s'\n", a.c_str());
      RunUsage(stderr);
      return kSetupFailed;
    }
    break;
  }
  if (i >= argc) {
    RunUsage(stderr);
    return kSetupFailed;
  }
  const std::string lib = SelfLibDir();
  if (lib.empty() || access((lib + "/libibverbs.so.1").c_str(), R_OK) != 0) {
    std::fprintf(stderr,
                 "softrnic run: warning: no libibverbs.so.1 in %s (lib/softrnic or lib beside this "
                 "tool's bin): programs will load the system's libraries; reinstall softrnic\n",
                 lib.empty() ? "?" : lib.c_str());
  }
  if (!lib.empty()) {
    const char* old = std::getenv("LD_LIBRARY_PATH");
    const std::string value = lib + (old && *old ? std::string(":") + old : "");
    setenv("LD_LIBRARY_PATH", value.c_str(), 1);
  }
  // Rendered before entering the namespaces, for our own pid: CMD is exec'd
  // by this very process, so the view is exact for CMD itself.
  const std::vector<TreeNode> tree = RenderSysfs(CurrentFacts(getpid()));
  Failure f;
  CounterTarget counters;
  if (!EnterNamespaces(&f) || !SetUpView(tree, &counters, &f)) {
    std::fprintf(stderr, "softrnic run: %s\n", f.what.c_str());
    if (!f.hint.empty()) std::fprintf(stderr, "  %s\n", f.hint.c_str());
    return kSetupFailed;
  }
  // Live port counters (no stats files to read with SOFTRNIC_STATS_SHM=0:
  // the files then stay 0).
  if (config::Environment::FromProcess().Flag("SOFTRNIC_STATS_SHM")) {
    const std::string e = StartCounterUpdater(counters.root_fd, counters.port_dir, getpid(),
                                              engine::StatsPublisher::Directory());
    if (!e.empty())
      std::fprintf(stderr, "softrnic run: warning: %s; the port counter files stay 0\n", e.c_str());
  }
  close(counters.root_fd);
  execvp(argv[i], argv + i);
  const int err = errno;
  std::fprintf(stderr, "softrnic run: %s: %s\n", argv[i],
               err == ENOENT ? "command not found" : std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace softrnic::tools
