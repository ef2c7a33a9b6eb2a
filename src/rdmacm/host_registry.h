// The rdma_cm host registry: how a same-host client finds a listener's
// process (docs/rdmacm.md "Addressing"). rdma_listen publishes
// "<pid> <loopback IP>" under <netns>-<port space hex>-<port>; a client
// resolving a same-host address reads it and sends its REQ to that
// process's loopback GID.
//
// Per user (security review H3): the registry is /dev/shm/softrnic-cm-<euid>,
// a directory created 0700 and used only while it is a real directory owned
// by the effective uid (transport/owned_files.h). Another local user can
// neither create entries in it (squat a port, name its own listener), nor
// plant a symlink or FIFO, nor read it. A directory of that name that
// another user made first is never used: root moves it aside and makes its
// own; another user falls back to /run/user/<uid>/softrnic-cm when its
// runtime directory exists, else (one message on stderr) publishes nothing
// and finds nothing: rdma_listen still succeeds, same-host connects are
// rejected. A denial of the same-host shortcut at worst, never a redirection.
//
// Consequence: same-host rdma_cm between two users does not go through the
// registry. A client of another uid finds no entry and gets REJECTED
// (reason 8, invalid service ID), as when nobody listens; it reaches the
// listener only through the network path, when the listener's process owns
// the destination address at port 4791 (the host's IP: the first softrnic
// process, or SOFTRNIC_BIND; docs/addressing.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "transport/owned_files.h"

namespace softrnic::rdmacm {

struct RegistryEntry {
  long pid = 0;
  uint32_t ip = 0;  // IPv4, host byte order
};

// Parses an entry's bytes ("<pid> <dotted IPv4>\n"): nullopt for anything
// else (truncated, oversized, binary junk, pid <= 0). Pure, for fuzzing.
std::optional<RegistryEntry> ParseRegistryEntry(std::string_view text);
// The bytes ParseRegistryEntry accepts for `entry`.
std::string FormatRegistryEntry(const RegistryEntry& entry);

class HostRegistry {
 public:
  // /dev/shm/softrnic-cm-<euid>.
  static std::string DefaultDirectory();
  // /run/user/<euid>/softrnic-cm if that runtime directory is the user's,
  // else "".
  static std::string FallbackDirectory();

  // `fallback` is used by a non-root user when `directory` exists but is
  // refused (root moves a refused directory aside instead).
  explicit HostRegistry(std::string directory, std::string fallback = "");

  // Where a listener on (netns, port space, port) is, if a live process of
  // ours registered it. A malformed entry or one whose process is gone is
  // removed.
  std::optional<RegistryEntry> Lookup(const std::string& netns, int ps, uint16_t port);
  // Publishes this process (getpid(), `loopback_ip`) for the port: 0, or
  // EADDRINUSE when another live process of ours holds it. Sweeps entries of
  // dead processes first (killed listeners never unregister).
  int Add(const std::string& netns, int ps, uint16_t port, uint32_t loopback_ip);
  // Removes the port's entry if it is this process's.
  void Remove(const std::string& netns, int ps, uint16_t port);

  const std::string& directory() const { return directory_; }

 private:
  // The verified directory (why it is refused is reported once on stderr).
  transport::OwnedDir OpenDir(bool create);
  std::optional<RegistryEntry> ReadEntry(int dirfd, const std::string& name);
  void Sweep(int dirfd);

  std::string directory_;
  std::string fallback_;
  bool reported_ = false;
};

}  // namespace softrnic::rdmacm
