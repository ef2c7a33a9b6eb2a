// Memory regions backed by a memfd, so that a same-host peer can map them
// and execute RDMA WRITE, READ and atomics with plain loads and stores while
// this process does nothing at all (docs/shm.md).
//
// At registration, the pages lying *entirely* inside the region that belong
// to private anonymous mappings (heap, mmap'd and memalign'd buffers; checked
// in /proc/self/maps), or to pages detached from an orphaned registration's
// memfd, are copied into a new memfd whose shared mapping then
// replaces them at the same address (mmap MAP_FIXED). Only pages with
// something in them are copied: pages never touched and pages of zeros stay
// holes of the memfd, and deregistration copies back only the memfd's data,
// so sharing costs what the region holds, not its size (issue 17). The first and last partial
// pages are left alone: other threads may be writing heap neighbours there
// at this very moment, and a copy would lose those writes. The table is
// process-wide (several devices may register the same buffer) and
// refcounted; a registration of the same pages, or nested inside a live
// registration of a shared range, reuses it at its offset; a partial
// overlap is not shared (it falls back to the ring). When a registration
// goes while others remain, its pages that none of them covers are made
// private at once, so no page stays shared without a registration.
//
// When the last registration of a range goes away, the range is turned back
// into private memory (copy of the memfd's data + mremap), so a peer that still maps the old
// memfd, or is still inside an access it began before the deregistration,
// no longer reaches this process's memory at all (shm_direct.h). A forked child does
// the same for every range (pthread_atfork), so it gets a private copy, just
// as plain anonymous memory would give it.
//
// Limitation: a thread of this process that writes to the region's pages
// *while* it is registered or deregistered may lose that write (it lands in
// the old pages between the copy and the mremap). Applications register
// buffers before using them for RDMA; see docs/shm.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace softrnic::engine {

struct SharedRange {
  uint64_t start = 0;      // page-aligned, inside the region
  uint64_t length = 0;     // 0: nothing could be shared
  int fd = -1;             // memfd in this process's fd table
  uint64_t ino = 0;        // its inode number (fds get reused, inodes not while open)
  uint64_t fd_offset = 0;  // offset of `start` in the memfd
  uint64_t memfd_size = 0;
  bool privatize = true;  // UnshareRegion of the last user copies back
};

// Shares the pages fully inside [addr, addr+length) if possible. Always
// succeeds; out->length is 0 when nothing was shared.
SharedRange ShareRegion(const void* addr, size_t length);
// Releases a ShareRegion result (no-op for an empty one). The last release
// turns the pages back into private memory (if they are still mapped from
// the memfd).
void UnshareRegion(const SharedRange& range);
// Releases without copying back, for regions whose device goes away without
// deregistering them: the application may have freed (and reused) the
// memory already, and other threads may be writing it, so the last release
// does not copy: its pages still on the memfd are mapped privately from it
// at the same address (copy-on-write, no write lost; shm_memory.cc,
// RetireEntry) and the range is forgotten, so memory mapped there later can
// be shared again.
void ReleaseRegion(const SharedRange& range);

// For tests: how many shared ranges exist in this process.
size_t SharedRangeCount();

}  // namespace softrnic::engine
