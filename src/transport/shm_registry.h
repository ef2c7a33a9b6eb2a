// Discovery of same-host peers for the shared-memory transport.
//
// Each device publishes, per local endpoint, a symlink
//   /dev/shm/softrnic-ep-<euid>/<netns inode>-<ipv4 hex>-<port>  ->  /proc/<pid>/fd/<memfd>
// in a directory of its user (0700, verified: transport/owned_files.h), so
// another user can neither hold a link name (once a flat name in sticky
// /dev/shm, which the victim could not replace: security review L4) nor
// plant a link; peers of another uid could not open the memfd anyway.
// A peer opens the symlink, which opens the memfd itself (the kernel checks
// that the opener may access the owner's fds: same user, dumpable), and then
// validates the segment header (ShmSegment::Attach). The netns inode in the
// name keeps processes in different network namespaces apart: for them the
// same address means a different host, so they keep using UDP.
//
// Stale links (a crashed owner) are harmless: /proc/<pid>/fd/<n> of a dead
// pid does not open, and a reused pid's fd fails the header check. A new
// owner of the endpoint replaces the link atomically (symlink + rename).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "transport/shm_path.h"

namespace softrnic::transport {

// This user's link directory, /dev/shm/softrnic-ep-<euid>.
std::string ShmEndpointDirectory();

// The link path for an endpoint (ip in network order).
// A host NIC address (docs/host-nic.md) is shared by every process of the
// user, so its links carry the lane too: <netns>-<ip hex>-<port>-L<lane>.
std::string ShmEndpointPath(uint64_t netns, uint32_t ip, uint16_t port, int lane = -1);

// Publishes `fd` of this process for the endpoint. Returns the link path, or
// "" on failure (then the endpoint is simply not reachable through shm).
// The link is removed by ShmUnpublish, or at exit for links of this process.
std::string ShmPublish(uint64_t netns, uint32_t ip, uint16_t port, int fd, int lane = -1);

// Removes the link if it still points at this process's `fd`.
void ShmUnpublish(const std::string& path, int fd);

// Removes links whose owner process no longer exists (crashed or killed
// processes cannot remove their own). Called when a device is created.
// Returns how many were removed; with `dry_run`, how many would be, removing
// nothing (`softrnic doctor`). A link published under the same name after
// the owner check (a new process with the dead owner's pid) is kept.
// `before_removal` (tests) runs between the check and the removal, with the
// link's name.
int ShmSweepStaleLinks(bool dry_run = false,
                       const std::function<void(const char*)>& before_removal = {});

// Opens the segment published for an endpoint. Returns the descriptor and the
// owner's pid (from the link target), or -1. If `why` is given, it receives
// the link's path and owner as far as they were read and, on failure, the
// step that failed (kNoLinkDirectory .. kOpenRefused) and the errno text.
int ShmLookup(uint64_t netns, uint32_t ip, uint16_t port, uint32_t* pid,
              ShmPathVerdict* why = nullptr, int lane = -1);

// One link of this user's directory, as its name and target say.
struct ShmLinkEntry {
  uint64_t netns = 0;
  uint32_t ip = 0;  // network order
  uint16_t port = 0;
  uint32_t pid = 0;  // 0: the target is no /proc/<pid>/fd/<n>
  int lane = -1;     // a host NIC address's link: the publisher's lane (docs/host-nic.md)
};
// Every endpoint link in this user's directory (any network namespace),
// without opening any. For `softrnic devinfo --peer`: who publishes an
// address in another namespace, which endpoints a pid publishes.
std::vector<ShmLinkEntry> ShmListLinks();

}  // namespace softrnic::transport
