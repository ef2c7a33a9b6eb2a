// Measures the mechanisms considered for one-sided operations between two
// processes on one host (docs/shm.md, "Choice"):
//   - process_vm_writev / process_vm_readv into the peer's private memory;
//   - plain stores / memcpy into a memfd mapped by both (what softrnic does).
// For each: a one-way ping-pong latency of an 8-byte store (each side spins
// on its own memory for the other's value, as ib_write_lat does), and the
// bandwidth of 64 KiB copies.
//
//   g++ -O2 -std=c++20 -o /tmp/direct_bench bench/shm/direct_bench.cc
//   taskset -c 0,1 /tmp/direct_bench     (parent pins itself to CPU 0, child to 1)
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kIters = 200000;
constexpr size_t kBw = 64 * 1024;
constexpr int kBwIters = 20000;

void Pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof(s), &s);
}

double Ns(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::nano>(b - a).count();
}

// Median of per-iteration round trips / 2 (the "typical" one-way latency,
// as perftest's t_typical), robust against preemption on a busy machine.
double MedianOneWay(std::vector<double>& rtt) {
  std::sort(rtt.begin(), rtt.end());
  return rtt[rtt.size() / 2] / 2;
}

struct alignas(64) Words {
  std::atomic<uint64_t> ping;  // written by the parent, read by the child
  char pad[56];
  std::atomic<uint64_t> pong;  // written by the child, read by the parent
};

// Plain stores into memory both processes map.
void SharedPingPong() {
  auto* w = static_cast<Words*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (w) Words{};
  const pid_t pid = fork();
  if (pid == 0) {
    Pin(1);
    for (uint64_t i = 1; i <= kIters; ++i) {
      while (w->ping.load(std::memory_order_acquire) != i) {
      }
      w->pong.store(i, std::memory_order_release);
    }
    _exit(0);
  }
  Pin(0);
  std::vector<double> rtt(kIters);
  const auto t0 = Clock::now();
  for (uint64_t i = 1; i <= kIters; ++i) {
    const auto a = Clock::now();
    w->ping.store(i, std::memory_order_release);
    while (w->pong.load(std::memory_order_acquire) != i) {
    }
    rtt[i - 1] = Ns(a, Clock::now());
  }
  const auto t1 = Clock::now();
  waitpid(pid, nullptr, 0);
  std::printf("mapped memory  8 B store ping-pong: one-way median %.0f ns, mean %.0f ns\n",
              MedianOneWay(rtt), Ns(t0, t1) / kIters / 2);
  munmap(w, 4096);
}

// process_vm_writev into the peer's private memory, each side spinning on its own.
void VmWritePingPong() {
  // Private memory, same address in both after fork.
  auto* w = static_cast<Words*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  new (w) Words{};
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    Pin(1);
    for (uint64_t i = 1; i <= kIters; ++i) {
      while (w->ping.load(std::memory_order_acquire) != i) {
      }
      iovec l{&i, 8}, r{&w->pong, 8};
      if (process_vm_writev(parent, &l, 1, &r, 1, 0) != 8) _exit(1);
    }
    _exit(0);
  }
  Pin(0);
  std::vector<double> rtt(kIters);
  const auto t0 = Clock::now();
  for (uint64_t i = 1; i <= kIters; ++i) {
    const auto a = Clock::now();
    iovec l{&i, 8}, r{&w->ping, 8};
    if (process_vm_writev(pid, &l, 1, &r, 1, 0) != 8) {
      std::printf("process_vm_writev refused (ptrace policy?)\n");
      kill(pid, 9);
      break;
    }
    while (w->pong.load(std::memory_order_acquire) != i) {
    }
    rtt[i - 1] = Ns(a, Clock::now());
  }
  const auto t1 = Clock::now();
  waitpid(pid, nullptr, 0);
  std::printf("process_vm_writev 8 B ping-pong:    one-way median %.0f ns, mean %.0f ns\n",
              MedianOneWay(rtt), Ns(t0, t1) / kIters / 2);
  munmap(w, 4096);
}

void Bandwidth() {
  std::vector<uint8_t> src(kBw, 1), dst(kBw);
  auto* shared = static_cast<uint8_t*>(mmap(nullptr, kBw, PROT_READ | PROT_WRITE,
                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  auto* priv = static_cast<uint8_t*>(mmap(nullptr, kBw, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::memset(shared, 0, kBw);
  std::memset(priv, 0, kBw);
  const pid_t pid = fork();
  if (pid == 0) {
    Pin(1);
    pause();
    _exit(0);
  }
  Pin(0);
  auto t0 = Clock::now();
  for (int i = 0; i < kBwIters; ++i) {
    std::memcpy(shared, src.data(), kBw);
    asm volatile("" ::: "memory");
  }
  auto t1 = Clock::now();
  std::printf("mapped memory  64 KiB memcpy write: %.1f GB/s\n", double(kBw) * kBwIters / Ns(t0, t1));
  t0 = Clock::now();
  for (int i = 0; i < kBwIters; ++i) {
    std::memcpy(dst.data(), shared, kBw);
    asm volatile("" ::: "memory");
  }
  t1 = Clock::now();
  std::printf("mapped memory  64 KiB memcpy read:  %.1f GB/s\n", double(kBw) * kBwIters / Ns(t0, t1));
  t0 = Clock::now();
  for (int i = 0; i < kBwIters; ++i) {
    iovec l{src.data(), kBw}, r{priv, kBw};
    process_vm_writev(pid, &l, 1, &r, 1, 0);
  }
  t1 = Clock::now();
  std::printf("process_vm_writev 64 KiB:           %.1f GB/s (%.0f ns/call)\n",
              double(kBw) * kBwIters / Ns(t0, t1), Ns(t0, t1) / kBwIters);
  t0 = Clock::now();
  for (int i = 0; i < kBwIters; ++i) {
    iovec l{dst.data(), kBw}, r{priv, kBw};
    process_vm_readv(pid, &l, 1, &r, 1, 0);
  }
  t1 = Clock::now();
  std::printf("process_vm_readv  64 KiB:           %.1f GB/s (%.0f ns/call)\n",
              double(kBw) * kBwIters / Ns(t0, t1), Ns(t0, t1) / kBwIters);
  uint64_t v = 1;
  t0 = Clock::now();
  for (int i = 0; i < kIters; ++i) {
    iovec l{&v, 8}, r{priv, 8};
    process_vm_writev(pid, &l, 1, &r, 1, 0);
  }
  t1 = Clock::now();
  std::printf("process_vm_writev 8 B call:         %.0f ns\n", Ns(t0, t1) / kIters);
  kill(pid, 9);
  waitpid(pid, nullptr, 0);
}

}  // namespace

int main() {
  SharedPingPong();
  VmWritePingPong();
  Bandwidth();
  return 0;
}
