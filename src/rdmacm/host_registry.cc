#include "rdmacm/host_registry.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "transport/owned_files.h"
#include "log/log.h"

namespace softrnic::rdmacm {
namespace {

// "<pid> <IPv4>\n" is at most ~30 bytes; anything larger is not ours.
constexpr size_t kMaxEntryBytes = 64;
constexpr const char* kTmpPrefix = ".tmp.";

std::string EntryName(const std::string& netns, int ps, uint16_t port) {
  char b[128];
  std::snprintf(b, sizeof b, "%s-%x-%u", netns.c_str(), unsigned(ps), unsigned(port));
  return b;
}

// Every entry in our directory is our uid's, so a pid we may not signal
// (EPERM) belongs to someone else now: the listener is gone and its pid
// was reused.
bool OurProcessAlive(long pid) { return pid > 0 && kill(pid_t(pid), 0) == 0; }

}  // namespace

std::optional<RegistryEntry> ParseRegistryEntry(std::string_view text) {
  if (text.size() > kMaxEntryBytes) return std::nullopt;
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  const size_t sp = text.find(' ');
  if (sp == std::string_view::npos || sp == 0) return std::nullopt;
  RegistryEntry e;
  const char* first = text.data();
  const char* last = text.data() + sp;
  const auto [end, ec] = std::from_chars(first, last, e.pid);
  if (ec != std::errc() || end != last || e.pid <= 0) return std::nullopt;
  const std::string_view ip = text.substr(sp + 1);
  if (ip.empty() || ip.size() > 15 || ip.find_first_not_of("0123456789.") != std::string_view::npos)
    return std::nullopt;  // also refuses an embedded NUL that inet_pton would stop at
  char ipz[16] = {};
  std::memcpy(ipz, ip.data(), ip.size());
  in_addr a{};
  if (inet_pton(AF_INET, ipz, &a) != 1) return std::nullopt;
  e.ip = ntohl(a.s_addr);
  return e;
}

std::string FormatRegistryEntry(const RegistryEntry& entry) {
  char ip[INET_ADDRSTRLEN] = {};
  const in_addr a{htonl(entry.ip)};
  inet_ntop(AF_INET, &a, ip, sizeof ip);
  return std::to_string(entry.pid) + " " + ip + "\n";
}

std::string HostRegistry::DefaultDirectory() { return "/dev/shm/softrnic-cm-" + std::to_string(geteuid()); }

std::string HostRegistry::FallbackDirectory() {
  // Only if the user's runtime directory exists and is its own (0700).
  const std::string run = "/run/user/" + std::to_string(geteuid());
  return transport::OwnedDir::Open(run, false, /*private_dir=*/true).ok() ? run + "/softrnic-cm" : "";
}

HostRegistry::HostRegistry(std::string directory, std::string fallback)
    : directory_(std::move(directory)), fallback_(std::move(fallback)) {}

transport::OwnedDir HostRegistry::OpenDir(bool create) {
  // Opened and verified for every operation (a few syscalls, on connection
  // setup only): a directory removed and re-created meanwhile (by us) is
  // followed, and everything inside goes through this verified fd.
  transport::OwnedDir dir = transport::OwnedDir::Open(directory_, create, /*private_dir=*/true);
  struct stat st;
  if (dir.ok() || lstat(directory_.c_str(), &st) != 0) return dir;  // fine, or not created yet
  // Something else holds the name: another user made it first (or it is a
  // symlink, or too open). Root may move it aside (rename never follows a
  // link) and make its own; every process of ours does the same.
  const std::string why = dir.why();
  if (geteuid() == 0) {
    const std::string aside = transport::UnpredictableName(directory_ + ".refused.");
    if (rename(directory_.c_str(), aside.c_str()) == 0) {
      SOFTRNIC_LOG(kWarn, "rdma_cm host registry %s; moved it aside to %s", why.c_str(),
                   aside.c_str());
      return transport::OwnedDir::Open(directory_, create, /*private_dir=*/true);
    }
  } else if (!fallback_.empty()) {
    // A user cannot move another user's entry out of sticky /dev/shm; its
    // systemd runtime directory (/run/user/<uid>, made by root) is its own.
    transport::OwnedDir alt = transport::OwnedDir::Open(fallback_, create, /*private_dir=*/true);
    if (alt.ok()) return alt;
  }
  if (!reported_) {
    reported_ = true;
    SOFTRNIC_LOG(kWarn,
                 "rdma_cm host registry not used (%s); same-host listeners of this "
                 "process are not published and none are found\n",
                 why.c_str());
  }
  return dir;
}

std::optional<RegistryEntry> HostRegistry::ReadEntry(int dirfd, const std::string& name) {
  transport::FileFacts facts;
  const std::optional<std::string> text = transport::ReadRegularFileAt(dirfd, name, kMaxEntryBytes, &facts);
  if (!text) {
    // Not a regular file of a sane size (a FIFO, symlink, device, huge
    // file): nothing we wrote. Only we can write here, but be robust.
    struct stat st;
    if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) unlinkat(dirfd, name.c_str(), 0);
    return std::nullopt;
  }
  std::optional<RegistryEntry> e = ParseRegistryEntry(*text);
  if (!e || facts.owner != geteuid() || !OurProcessAlive(e->pid)) {
    unlinkat(dirfd, name.c_str(), 0);
    return std::nullopt;
  }
  return e;
}

void HostRegistry::Sweep(int dirfd) {
  const int scan = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (scan < 0) return;
  DIR* d = fdopendir(scan);
  if (d == nullptr) {
    close(scan);
    return;
  }
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;  // ".", "..", and temporaries
    ReadEntry(dirfd, e->d_name);
  }
  closedir(d);
}

std::optional<RegistryEntry> HostRegistry::Lookup(const std::string& netns, int ps, uint16_t port) {
  const transport::OwnedDir dir = OpenDir(false);
  if (!dir.ok()) return std::nullopt;
  return ReadEntry(dir.fd(), EntryName(netns, ps, port));
}

int HostRegistry::Add(const std::string& netns, int ps, uint16_t port, uint32_t loopback_ip) {
  const transport::OwnedDir dir = OpenDir(true);
  if (!dir.ok()) return 0;  // no usable registry: nothing published (see the header)
  const int dirfd = dir.fd();
  Sweep(dirfd);
  const std::string name = EntryName(netns, ps, port);
  const std::string tmp = transport::UnpredictableName(kTmpPrefix);
  if (transport::WriteNewFileAt(dirfd, tmp, FormatRegistryEntry({long(getpid()), loopback_ip}), 0600) != 0)
    return 0;
  int rc = 0;
  // link() publishes the complete entry atomically and fails if the name
  // exists (rename would silently replace a live listener's entry).
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (linkat(dirfd, tmp.c_str(), dirfd, name.c_str(), 0) == 0) break;
    if (errno != EEXIST) break;
    const std::optional<RegistryEntry> holder = ReadEntry(dirfd, name);
    if (holder && holder->pid != long(getpid())) {
      rc = EADDRINUSE;
      break;
    }
    // ReadEntry removed a stale entry; a live one of ours is replaced.
    if (holder) unlinkat(dirfd, name.c_str(), 0);
  }
  unlinkat(dirfd, tmp.c_str(), 0);
  return rc;
}

void HostRegistry::Remove(const std::string& netns, int ps, uint16_t port) {
  const transport::OwnedDir dir = OpenDir(false);
  if (!dir.ok()) return;
  const int dirfd = dir.fd();
  const std::string name = EntryName(netns, ps, port);
  const std::optional<RegistryEntry> e = ReadEntry(dirfd, name);
  if (e && e->pid == long(getpid())) unlinkat(dirfd, name.c_str(), 0);
}

}  // namespace softrnic::rdmacm
