#include "engine/shm_memory.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
  // The page ranges of the registrations using this entry, one per ref: a
  // registration nested in another shares its memfd, and when one goes,
  // its pages that no remaining registration covers are made private again
  // (UnshareRegion), so nothing stays shared beyond what is registered.
  std::vector<std::pair<uint64_t, uint64_t>> live;
  // Its pages could not all be detached (RetireEntry): never reused for a
  // registration; kept only so that fork() privatizes what is left of it.
  bool retired = false;
};

struct Table {
  std::mutex mu;
  std::vector<Entry> entries;
};

Table& GetTable();

// Moves the mapping at `from` over [to, to+length) (MREMAP_FIXED), by the
// system call itself, not libc's mremap(): UCX's memory hooks (ucm) replace
// that function, and before UCX 1.15 (Debian 12 has 1.13) the replacement
// forwards only four arguments, so the fifth, the new address, arrives as
// garbage and every MREMAP_FIXED fails with EINVAL inside a UCX process (no
// buffer of UCX's was ever shared before; docs/middleware.md).
bool RemapFixed(void* from, uint64_t length, uint64_t to) {
  return syscall(SYS_mremap, from, length, length, MREMAP_MAYMOVE | MREMAP_FIXED,
                 reinterpret_cast<void*>(to)) != -1;
}

// Turns [start, start+length), backed by `fd` from `fd_offset`, back into
// private anonymous memory with the same contents. The contents are read
// from the memfd (pread), not from the address: the memory may have been
// freed by the application (a sanitizer would flag the read). Callers pass
// only pages still mapped from the memfd (BackedBy, PiecesLeft).
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
  if (!RemapFixed(tmp, length, start)) {
    munmap(tmp, length);
    return false;
  }
  return true;
}

// The parts of an entry's range still mapped from its memfd. Parts may be
// gone while others remain: the application freed the buffer and the
// allocator returned some of its pages to the kernel (a heap trimmed below
// it, a partial munmap) and perhaps mapped new memory there. What remains
// is still this process's memory, in use by whatever the allocator made of
// it, and still shared with the memfd.
struct Piece {
  uint64_t lo, hi, fd_offset;
  int prot;  // as mapped now (an allocator may have made guard pages)
};
std::vector<Piece> PiecesLeft(const Entry& e);

// Detaches a piece from the memfd without copying: the same file pages are
// mapped again at the same address, privately (MAP_PRIVATE | MAP_FIXED
// replaces the shared mapping in one step). What any thread wrote before is
// in the file's pages and stays visible; what it writes after goes to this
// process's own copy-on-write pages, so no concurrent write is lost (unlike
// Privatize's copy, which needs the memory to be quiet). From then on this
// process's writes no longer reach the memfd, and a fork gives the child
// ordinary copy-on-write memory. Safe while other threads run.
bool DetachPiece(const Piece& p, int fd) {
  return mmap(reinterpret_cast<void*>(p.lo), p.hi - p.lo, p.prot, MAP_PRIVATE | MAP_FIXED, fd,
              static_cast<off_t>(p.fd_offset)) != MAP_FAILED;
}

void AtforkPrepare() { GetTable().mu.lock(); }
void AtforkParent() { GetTable().mu.unlock(); }
// The child is single-threaded here: give it private copies of every page
// still on a memfd, of whole ranges and of what is left of retired ones
// (copy-on-write semantics, as for any anonymous memory), and forget the
// parent's memfds. Pages left shared would be handed out by both processes'
// allocators (heap corruption: "malloc(): mismatching next->prev_size").
void AtforkChild() {
  Table& t = GetTable();
  for (const Entry& e : t.entries) {
    for (const Piece& p : PiecesLeft(e)) (void)Privatize(p.lo, p.hi - p.lo, e.fd, p.fd_offset);
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

// One line of /proc/self/maps.
struct Mapping {
  uint64_t lo = 0, hi = 0, offset = 0, inode = 0;
  char perms[8] = {};
  const char* name = "";
};

// Calls fn(mapping) for each line of /proc/self/maps, in address order,
// until it returns false. False if the file cannot be read.
template <class Fn>
bool ForEachMapping(Fn&& fn) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return false;
  char line[512];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long lo = 0, hi = 0, offset = 0, inode = 0;
    char dev[16] = {};
    Mapping m;
    int name_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %lx %15s %lu %n", &lo, &hi, m.perms, &offset, dev, &inode,
                    &name_at) < 6)
      continue;
    m.lo = lo;
    m.hi = hi;
    m.offset = offset;
    m.inode = inode;
    m.name = line + name_at;
    if (!fn(m)) break;
  }
  std::fclose(f);
  return true;
}

// True if every byte of [start, end) lies in mappings for which
// accept(perms, inode, name) holds (a hole is a no).
template <class Accept>
bool MapsCover(uint64_t start, uint64_t end, Accept&& accept) {
  uint64_t covered = start;  // everything below this is known to be fine
  bool ok = false;
  ForEachMapping([&](const Mapping& m) {
    if (m.hi <= covered) return true;
    if (m.lo > covered || !accept(m.perms, m.inode, m.name)) return false;  // a hole, or refused
    covered = m.hi;
    ok = covered >= end;
    return !ok;
  });
  return ok;
}

std::vector<Piece> PiecesLeft(const Entry& e) {
  std::vector<Piece> pieces;
  const uint64_t end = e.start + e.length;
  ForEachMapping([&](const Mapping& m) {
    if (m.inode == e.ino && m.perms[3] == 's' && m.hi > e.start && m.lo < end) {
      const uint64_t a = std::max(m.lo, e.start), b = std::min(m.hi, end);
      const int prot = (m.perms[0] == 'r' ? PROT_READ : 0) | (m.perms[1] == 'w' ? PROT_WRITE : 0) |
                       (m.perms[2] == 'x' ? PROT_EXEC : 0);
      pieces.push_back(Piece{a, b, m.offset + (a - m.lo), prot});
    }
    return true;
  });
  return pieces;
}

// An entry whose memory is no longer a registration's, at its last release
// (freed in part before deregistration, or orphaned by a device that went
// away: ReleaseRegion) or found stale: other threads may be using that
// memory, so what is left of it on the memfd is detached (DetachPiece, no
// copy, nothing lost) rather than privatized, and the entry forgotten. Left
// on the memfd, those pages stayed shared with the memfd after the
// allocator reused them: a forked child's malloc found them changed by the
// parent's threads between fork() and AtforkChild (SIGSEGV in _int_malloc),
// and fresh memory mapped there later was never shared again. If a detach
// fails the entry is kept, retired, for AtforkChild (single-threaded, so it
// can privatize). True if erased.
bool RetireEntry(Table& t, size_t i) {
  Entry& e = t.entries[i];
  for (const Piece& p : PiecesLeft(e)) (void)DetachPiece(p, e.fd);
  if (PiecesLeft(e).empty()) {
    close(e.fd);
    t.entries.erase(t.entries.begin() + static_cast<long>(i));
    return true;
  }
  e.retired = true;
  e.refs = 0;
  e.live.clear();
  return false;
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

// True if [start, end) lies inside one of the entry's live registrations:
// those pages are still on the memfd (pages leave it only when no
// registration covers them any more).
bool InsideLive(const Entry& e, uint64_t start, uint64_t end) {
  return std::any_of(e.live.begin(), e.live.end(),
                     [&](const auto& r) { return start >= r.first && end <= r.second; });
}

// True if every live registration's pages are still mapped from the memfd
// (none was freed and reused without deregistration).
bool LiveBacked(const Entry& e) {
  return std::all_of(e.live.begin(), e.live.end(),
                     [&](const auto& r) { return BackedBy(r.first, r.second, e.ino); });
}

// The parts of [start, end) that no live registration of `e` covers.
std::vector<std::pair<uint64_t, uint64_t>> Uncovered(const Entry& e, uint64_t start, uint64_t end) {
  std::vector<std::pair<uint64_t, uint64_t>> live = e.live;
  std::sort(live.begin(), live.end());
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t at = start;
  for (const auto& [lo, hi] : live) {
    if (hi <= at || lo >= end) continue;
    if (lo > at) out.emplace_back(at, lo);
    at = std::max(at, hi);
    if (at >= end) break;
  }
  if (at < end) out.emplace_back(at, end);
  return out;
}

}  // namespace

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
    if (e.retired || !LiveBacked(e)) {
      // Stale: the memory was unmapped without deregistration, in part or
      // whole, and the address reused. Its pages still on the memfd are
      // not private anonymous memory, so they are not shared again below.
      if (RetireEntry(t, i)) --i;
      continue;
    }
    if (InsideLive(e, start, end)) {
      // Inside a registration that shares these pages (the same pages, or
      // nested: UCX registers buffers inside its registered pools): reuse
      // its memfd. When a registration goes, the pages no other one covers
      // are made private again (UnshareRegion), so an access still in
      // flight for it never lands in memory no registration covers.
      ++e.refs;
      e.live.emplace_back(start, end);
      out.start = start;
      out.length = end - start;
      out.fd = e.fd;
      out.ino = e.ino;
      out.fd_offset = start - e.start;
      out.memfd_size = e.length;
      return out;
    }
    // Any other overlap (partial, or pages a registration that went has
    // already made private) is not shared; the ring path serves it.
    return out;
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
  if (!RemapFixed(shared, len, start)) {
    munmap(shared, len);
    close(fd);
    return out;
  }
  t.entries.push_back(Entry{start, len, fd, static_cast<uint64_t>(st.st_ino), 1, {{start, end}}});
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
    const uint64_t r_end = range.start + range.length;
    const auto it = std::find(e.live.begin(), e.live.end(), std::make_pair(range.start, r_end));
    if (it != e.live.end()) e.live.erase(it);
    if (e.refs > 0) --e.refs;
    if (e.refs > 0) {
      // Other registrations remain: this one's pages that none of them
      // covers go back to private memory now, as at the last release.
      if (!range.privatize) return;
      for (const auto& [lo, hi] : Uncovered(e, range.start, r_end))
        if (BackedBy(lo, hi, e.ino)) (void)Privatize(lo, hi - lo, e.fd, lo - e.start);
      return;
    }
    // Last user: back to private memory, so the memfd (which peers may still
    // map) no longer aliases this process's memory. Earlier releases made
    // their own uncovered pages private, so what is still on the memfd is
    // this registration's range. Only if it is still whole: memory unmapped
    // before deregistration is left alone.
    if (!range.privatize) {  // orphaned: see ReleaseRegion
      (void)RetireEntry(t, i);
      return;
    }
    if (!BackedBy(range.start, r_end, e.ino)) {
      (void)RetireEntry(t, i);  // freed (in part) before deregistration
      return;
    }
    (void)Privatize(range.start, range.length, e.fd, range.start - e.start);
    (void)RetireEntry(t, i);  // forgotten, unless a privatization failed
    return;
  }
}

size_t SharedRangeCount() {
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.entries.size();
}

}  // namespace softrnic::engine
