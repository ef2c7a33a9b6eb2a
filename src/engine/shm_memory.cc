#include "engine/shm_memory.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace softrnic::engine {
namespace {

struct Entry {
  uint64_t start = 0;
  uint64_t length = 0;
  int fd = -1;
  uint64_t ino = 0;
  int refs = 0;
};

struct Table {
  std::mutex mu;
  std::vector<Entry> entries;
};

Table& GetTable();

// Turns [start, start+length), backed by `fd` from `fd_offset`, back into
// private anonymous memory with the same contents. The contents are read
// from the memfd (pread), not from the address: the memory may have been
// freed by the application (a sanitizer would flag the read). Callers pass
// only pages still mapped from the memfd (PrivatizeWhatRemains).
// Returns false (and leaves the shared mapping) on failure.
bool Privatize(uint64_t start, uint64_t length, int fd, uint64_t fd_offset) {
  void* tmp = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return false;
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd, static_cast<uint8_t*>(tmp) + done, length - done,
                            static_cast<off_t>(fd_offset + done));
    if (n <= 0) {
      munmap(tmp, length);
      return false;
    }
    done += static_cast<uint64_t>(n);
  }
  if (mremap(tmp, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(start)) ==
      MAP_FAILED) {
    munmap(tmp, length);
    return false;
  }
  return true;
}

// Turns every part of the entry's range that is still mapped from its memfd
// back into private memory. Parts may be gone while others remain: the
// application freed the buffer and the allocator returned some of its pages
// to the kernel (a heap trimmed below it, a partial munmap) and perhaps
// mapped new memory there. What remains is still this process's memory,
// and left on the memfd it would stay shared: with a peer that maps the
// memfd, and after fork() with the child (both allocators then hand out the
// same pages: heap corruption).
void PrivatizeWhatRemains(const Entry& e);

void AtforkPrepare() { GetTable().mu.lock(); }
void AtforkParent() { GetTable().mu.unlock(); }
// The child is single-threaded here: give it private copies of every shared
// range (copy-on-write semantics, as for any anonymous memory) and forget
// the parent's memfds.
void AtforkChild() {
  Table& t = GetTable();
  for (const Entry& e : t.entries) {
    PrivatizeWhatRemains(e);
    close(e.fd);
  }
  t.entries.clear();
  t.mu.unlock();
}

Table& GetTable() {
  static Table* table = [] {
    pthread_atfork(AtforkPrepare, AtforkParent, AtforkChild);
    return new Table;  // never destroyed: used by atfork handlers
  }();
  return *table;
}

// Walks /proc/self/maps: true if every byte of [start, end) lies in
// mappings for which accept(perms, inode, name) holds (a hole is a no).
template <class Accept>
bool MapsCover(uint64_t start, uint64_t end, Accept&& accept) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return false;
  char line[512];
  uint64_t covered = start;  // everything below this is known to be fine
  bool ok = false;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long lo = 0, hi = 0, offset = 0, inode = 0;
    char perms[8] = {};
    char dev[16] = {};
    int name_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %lx %15s %lu %n", &lo, &hi, perms, &offset, dev, &inode,
                    &name_at) < 6)
      continue;
    if (hi <= covered) continue;
    if (lo > covered || !accept(perms, inode, line + name_at)) break;  // a hole, or refused
    covered = hi;
    if (covered >= end) {
      ok = true;
      break;
    }
  }
  std::fclose(f);
  return ok;
}

void PrivatizeWhatRemains(const Entry& e) {
  struct Piece {
    uint64_t lo, hi, fd_offset;
  };
  // Collected first: the mremaps below change /proc/self/maps.
  std::vector<Piece> pieces;
  const uint64_t end = e.start + e.length;
  if (FILE* f = std::fopen("/proc/self/maps", "re")) {
    char line[512];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      unsigned long lo = 0, hi = 0, offset = 0, inode = 0;
      char perms[8] = {};
      char dev[16] = {};
      if (std::sscanf(line, "%lx-%lx %7s %lx %15s %lu", &lo, &hi, perms, &offset, dev, &inode) < 6)
        continue;
      if (inode != e.ino || perms[3] != 's' || hi <= e.start || lo >= end) continue;
      const uint64_t a = std::max<uint64_t>(lo, e.start), b = std::min<uint64_t>(hi, end);
      pieces.push_back(Piece{a, b, offset + (a - lo)});
    }
    std::fclose(f);
  }
  for (const Piece& p : pieces) (void)Privatize(p.lo, p.hi - p.lo, e.fd, p.fd_offset);
}

// True if every byte of [start, end) lies in private anonymous read-write
// mappings (no file, not the stack), according to /proc/self/maps.
bool PrivateAnonymous(uint64_t start, uint64_t end) {
  return MapsCover(start, end, [](const char* perms, unsigned long inode, const char* name) {
    const bool anon_name = name[0] == '\0' || name[0] == '\n' ||
                           std::strncmp(name, "[heap]", 6) == 0;
    return std::strcmp(perms, "rw-p") == 0 && inode == 0 && anon_name;
  });
}

// True if [start, end) is still mapped, entirely, from the memfd with inode
// `ino`. A buffer freed without deregistration (munmap) and allocated again
// at the same address is no longer ours, so its table entry is stale.
bool BackedBy(uint64_t start, uint64_t end, uint64_t ino) {
  return MapsCover(start, end, [ino](const char* perms, unsigned long inode, const char*) {
    return inode == ino && perms[3] == 's';
  });
}

}  // namespace

bool ShmDirectEnabled() {
  const char* e = std::getenv("SOFTRNIC_SHM_DIRECT");
  return e == nullptr || std::strcmp(e, "0") != 0;
}

SharedRange ShareRegion(const void* addr, size_t length) {
  SharedRange out;
  if (addr == nullptr || length == 0) return out;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  if (a > UINT64_MAX - length) return out;
  const uint64_t start = (a + page - 1) & ~(page - 1);
  const uint64_t end = (a + length) & ~(page - 1);
  if (end <= start) return out;  // no whole page inside

  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  for (size_t i = 0; i < t.entries.size(); ++i) {
    Entry& e = t.entries[i];
    const uint64_t e_end = e.start + e.length;
    if (end <= e.start || start >= e_end) continue;
    if (!BackedBy(e.start, e_end, e.ino)) {
      // Stale: the memory was unmapped without deregistration, in part or
      // whole, and the address reused. Forget it after turning what is
      // left of it private (never touching the new mappings).
      PrivatizeWhatRemains(e);
      close(e.fd);
      t.entries.erase(t.entries.begin() + static_cast<long>(i));
      --i;
      continue;
    }
    if (start >= e.start && end <= e_end) {
      // Inside an existing shared range: reuse its memfd.
      ++e.refs;
      out.start = start;
      out.length = end - start;
      out.fd = e.fd;
      out.ino = e.ino;
      out.fd_offset = start - e.start;
      out.memfd_size = e.length;
      return out;
    }
    return out;  // partial overlap: not shared (the ring path serves it)
  }
  if (!PrivateAnonymous(start, end)) return out;
  const uint64_t len = end - start;
  const int fd = memfd_create("softrnic-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return out;
  struct stat st{};
  // Sealed against shrinking: a peer's mapping of it can never SIGBUS.
  if (ftruncate(fd, static_cast<off_t>(len)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
      fstat(fd, &st) != 0) {
    close(fd);
    return out;
  }
  void* shared = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (shared == MAP_FAILED) {
    close(fd);
    return out;
  }
  std::memcpy(shared, reinterpret_cast<void*>(start), len);
  // Atomically replaces the private pages with the shared ones at the same
  // address (MREMAP_FIXED unmaps whatever was there).
  if (mremap(shared, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(start)) ==
      MAP_FAILED) {
    munmap(shared, len);
    close(fd);
    return out;
  }
  t.entries.push_back(Entry{start, len, fd, static_cast<uint64_t>(st.st_ino), 1});
  out.start = start;
  out.length = len;
  out.fd = fd;
  out.ino = static_cast<uint64_t>(st.st_ino);
  out.fd_offset = 0;
  out.memfd_size = len;
  return out;
}

void ReleaseRegion(const SharedRange& range) {
  SharedRange r = range;
  r.privatize = false;
  UnshareRegion(r);
}

void UnshareRegion(const SharedRange& range) {
  if (range.length == 0) return;
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  for (size_t i = 0; i < t.entries.size(); ++i) {
    Entry& e = t.entries[i];
    if (e.fd != range.fd || e.ino != range.ino) continue;
    if (e.refs > 0) --e.refs;
    if (e.refs > 0) return;
    // Last user: back to private memory, so the memfd (which peers may still
    // map) no longer aliases this process's memory: the pages still mapped
    // from it (memory unmapped before deregistration is left alone).
    if (!range.privatize) return;  // orphaned: see ReleaseRegion
    PrivatizeWhatRemains(e);
    close(e.fd);
    t.entries.erase(t.entries.begin() + static_cast<long>(i));
    return;
  }
}

size_t SharedRangeCount() {
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.entries.size();
}

}  // namespace softrnic::engine
