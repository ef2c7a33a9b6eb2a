#include "engine/same_host/shm_memory.h"

#include <errno.h>
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

// Maps `fd` from `fd_offset` over [start, start+length), shared, by the
// system call itself (see RemapFixed: ucm hooks mmap too, and a hooked call
// would tell UCX's registration cache the memory was unmapped). MAP_FIXED
// replaces the private pages at the same address in one step.
bool MapSharedFixed(uint64_t start, uint64_t length, int fd, uint64_t fd_offset) {
  const long r = syscall(SYS_mmap, reinterpret_cast<void*>(start), length, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(fd_offset));
  return r != -1;
}

// Reads [offset, offset+length) of fd into `to`; false on a short read.
bool PreadAll(int fd, uint8_t* to, uint64_t length, uint64_t offset) {
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd, to + done, length - done, static_cast<off_t>(offset + done));
    if (n <= 0) return false;
    done += static_cast<uint64_t>(n);
  }
  return true;
}

// Writes [from, from+length) to fd at offset; false on a short write.
bool PwriteAll(int fd, const uint8_t* from, uint64_t length, uint64_t offset) {
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = pwrite(fd, from + done, length - done, static_cast<off_t>(offset + done));
    if (n <= 0) return false;
    done += static_cast<uint64_t>(n);
  }
  return true;
}

// Turns [start, start+length), backed by `fd` from `fd_offset`, back into
// private anonymous memory with the same contents. The contents are read
// from the memfd (pread), not from the address: the memory may have been
// freed by the application (a sanitizer would flag the read). Only the
// memfd's data is read: its holes (pages never written, or written only
// with zeros at ShareRegion) stay untouched zero pages of the new mapping,
// so a large, mostly unused region costs no copy and no fresh pages
// (issue 17: fresh pages are the cost here, ~10 us each on these VMs).
// Callers pass only pages still mapped from the memfd (BackedBy,
// PiecesLeft). Returns false (and leaves the shared mapping) on failure.
bool Privatize(uint64_t start, uint64_t length, int fd, uint64_t fd_offset) {
  void* tmp = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return false;
  auto* to = static_cast<uint8_t*>(tmp);
  const uint64_t end = fd_offset + length;
  bool ok = true;
  for (uint64_t at = fd_offset; at < end && ok;) {
    const off_t data = lseek(fd, static_cast<off_t>(at), SEEK_DATA);
    if (data < 0) {
      ok = errno == ENXIO;  // no data from `at` on: the rest is a hole
      break;
    }
    if (static_cast<uint64_t>(data) >= end) break;
    const off_t hole = lseek(fd, data, SEEK_HOLE);
    const uint64_t run_end =
        hole < 0 ? end : std::min(end, static_cast<uint64_t>(hole));
    const uint64_t run_start = static_cast<uint64_t>(data);
    ok = PreadAll(fd, to + (run_start - fd_offset), run_end - run_start, run_start);
    at = run_end;
  }
  if (!ok || !RemapFixed(tmp, length, start)) {
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

// The name /proc/self/maps gives our memfds ("softrnic-mr").
constexpr char kMemfdMapName[] = "/memfd:softrnic-mr";

// True if every byte of [start, end) lies in private read-write memory of
// this process, according to /proc/self/maps: anonymous mappings (no file,
// not the stack), or pages detached from one of our memfds (DetachPiece:
// mapped privately from an orphaned registration's memfd, then perhaps
// handed out again by the allocator; refusing them left such heap memory
// unshareable for good). *anonymous_only says whether all of it is
// anonymous: only there does an untouched page read as zeros
// (CopyTouchedPages); a detached page not yet written reads the memfd.
bool PrivateMemory(uint64_t start, uint64_t end, bool* anonymous_only) {
  *anonymous_only = true;
  return MapsCover(start, end, [&](const char* perms, unsigned long inode, const char* name) {
    if (std::strcmp(perms, "rw-p") != 0) return false;
    const bool anon_name = name[0] == '\0' || name[0] == '\n' ||
                           std::strncmp(name, "[heap]", 6) == 0;
    if (inode == 0 && anon_name) return true;
    if (std::strncmp(name, kMemfdMapName, sizeof(kMemfdMapName) - 1) != 0) return false;
    *anonymous_only = false;
    return true;
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
// (none was freed and reused without deregistration). One read of
// /proc/self/maps for all of them: asked once per registration, a read per
// live registration made registering the same buffer n times cost n^2/2
// reads (2,000 registrations took minutes under ThreadSanitizer).
bool LiveBacked(const Entry& e) {
  if (e.live.empty()) return true;
  // The stretches of the address space mapped shared from the memfd, in
  // address order, adjacent mappings joined.
  std::vector<std::pair<uint64_t, uint64_t>> on_memfd;
  ForEachMapping([&](const Mapping& m) {
    if (m.inode != e.ino || m.perms[3] != 's') return true;
    if (!on_memfd.empty() && on_memfd.back().second == m.lo) on_memfd.back().second = m.hi;
    else on_memfd.emplace_back(m.lo, m.hi);
    return true;
  });
  return std::all_of(e.live.begin(), e.live.end(), [&](const auto& r) {
    return std::any_of(on_memfd.begin(), on_memfd.end(), [&](const auto& piece) {
      return r.first >= piece.first && r.second <= piece.second;
    });
  });
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

// proc(5), /proc/pid/pagemap: one 64-bit entry per page; bit 63 says the
// page is present in RAM, bit 62 that it is swapped out. Neither: the page
// was never touched (or was discarded), and reads as zeros.
constexpr uint64_t kPagemapPresent = 1ull << 63;
constexpr uint64_t kPagemapSwapped = 1ull << 62;

// True if the n bytes at p are all zero (n >= 8): the first eight bytes
// are zero and every byte equals the one eight bytes before it.
bool AllZero(const uint8_t* p, uint64_t n) {
  uint64_t head = 0;
  std::memcpy(&head, p, sizeof(head));
  return head == 0 && std::memcmp(p, p + sizeof(head), n - sizeof(head)) == 0;
}

// Copies the contents of the private pages [start, end) into the fresh
// memfd `fd` (offset 0 = start), leaving holes where there is nothing to
// copy: pages never touched (pagemap shows them neither present nor
// swapped; only for anonymous memory, `trust_pagemap`) and pages that hold
// only zeros. A hole reads as zeros, so the
// memfd ends up with the same contents, and neither a large, mostly unused
// region nor a zeroed one costs a copy or fresh pages (issue 17: 1 GiB
// untouched took 6.6 s to share by copying, touched 3.9 s, nearly all of
// it first writes to fresh pages). Without a readable pagemap every page
// is examined. False if a write fails. `entries` (kPagemapChunk long) is
// the caller's scratch, see ShareRegion: nothing here allocates or frees.
constexpr uint64_t kPagemapChunk = 4096;  // pagemap entries read at a time (16 MiB of pages)
bool CopyTouchedPages(uint64_t start, uint64_t end, int fd, bool trust_pagemap,
                      uint64_t* entries) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const int pagemap = trust_pagemap ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
  constexpr uint64_t kChunk = kPagemapChunk;
  uint64_t run = 0, run_len = 0;  // the pending run of pages to write
  auto flush = [&] {
    const bool ok = run_len == 0 || PwriteAll(fd, reinterpret_cast<const uint8_t*>(run),
                                              run_len, run - start);
    run_len = 0;
    return ok;
  };
  bool ok = true;
  for (uint64_t at = start; at < end && ok;) {
    const uint64_t n = std::min(kChunk, (end - at) / page);
    bool known = false;
    if (pagemap >= 0) {
      const ssize_t got = pread(pagemap, entries, n * sizeof(uint64_t),
                                static_cast<off_t>(at / page * sizeof(uint64_t)));
      known = got == static_cast<ssize_t>(n * sizeof(uint64_t));
    }
    for (uint64_t i = 0; i < n && ok; ++i, at += page) {
      const bool maybe_data = !known || (entries[i] & (kPagemapPresent | kPagemapSwapped)) != 0;
      if (maybe_data && !AllZero(reinterpret_cast<const uint8_t*>(at), page)) {
        if (run_len == 0) run = at;
        run_len += page;
      } else {
        ok = flush();
      }
    }
  }
  ok = ok && flush();
  if (pagemap >= 0) close(pagemap);
  return ok;
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
      // detached from it (private from then on), and may be shared anew
      // below like any private memory.
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
  bool anonymous_only = true;
  if (!PrivateMemory(start, end, &anonymous_only)) return out;
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
  // The copy's scratch is allocated before the copy and freed only after the
  // remap. The range may hold free heap memory (a registration cache such
  // as UCX's keeps buffers registered after the application freed them,
  // and its regions may reach beyond a buffer), so malloc may place this
  // very buffer inside it. Freed between the copy and the remap (it was a local of
  // CopyTouchedPages), free()'s writes to the chunk headers and free lists
  // went to the old pages and were lost: glibc's arena then disagreed with
  // the heap ("free(): corrupted unsorted chunks", "malloc(): mismatching
  // next->prev_size" in MPICH ranks over ch4:ucx, 8 ranks on one host).
  // Nothing may touch the heap between the two (this thread's own writes
  // are as lost as another thread's).
  std::vector<uint64_t> pagemap_scratch(kPagemapChunk);
  if (!CopyTouchedPages(start, end, fd, anonymous_only, pagemap_scratch.data()) ||
      !MapSharedFixed(start, len, fd, 0)) {
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
