// shm_floor - what a ping-pong through shared memory alone costs on this
// machine, and how its tail looks, so that softrnic's shared-memory latency
// and its p99.9 can be read against the floor they stand on (issue 39: "the
// floor that shows whether the target is reachable on this machine").
//
//   shm_floor [--iters N] [--pin A,B] [--payload BYTES]
//     Two processes (fork) share one anonymous MAP_SHARED mapping. Each
//     busy-polls a sequence word on its own cache line; a trip is: copy
//     `payload` bytes (default 8, an 8 B RDMA WRITE's data) into the peer's
//     line, store the sequence number with release order, and spin until
//     the peer's answer arrives. No system call, no lock, no engine: the
//     least any design that moves data between two processes through
//     memory can take, including this VM's interruptions (timer ticks, the
//     hypervisor taking a vCPU), which no software design can avoid.
//     Prints "one_way_us typical=<median> avg=<mean> p99=<p99> p999=<p99.9>
//     max=<max> iters=<n> over_10us=<count>" (half round trips, as
//     perftest's t_typical and udp_floor print them; percentiles are the
//     sorted samples at n*99/100 and n*999/1000).
//
// Not a softrnic component: no engine, no verbs.
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct alignas(64) Line {
  std::atomic<uint64_t> seq{0};
  unsigned char data[56];
};

struct Shared {
  Line to_server;
  Line to_client;
  std::atomic<int> ready{0};
};

void Pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Waits until `line` holds `want`; false if the peer never answers (10 s).
bool Await(const Line& line, uint64_t want) {
  uint64_t spins = 0;
  const auto start = std::chrono::steady_clock::now();
  while (line.seq.load(std::memory_order_acquire) != want) {
    CpuRelax();
    if ((++spins & 0xFFFFF) == 0 && std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      return false;
  }
  return true;
}

int Usage() {
  std::fprintf(stderr, "usage: shm_floor [--iters N] [--pin A,B] [--payload BYTES (<= 56)]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 200000, pin_client = -1, pin_server = -1;
  size_t payload = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (a == "--pin" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d,%d", &pin_client, &pin_server) != 2) return Usage();
    } else if (a == "--payload" && i + 1 < argc) {
      payload = static_cast<size_t>(std::atol(argv[++i]));
    } else {
      return Usage();
    }
  }
  if (iters < 1000 || payload > sizeof(Line::data)) return Usage();

  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* shared = new (mem) Shared();
  const int warmup = iters / 10;
  const int total = warmup + iters;

  const pid_t server = fork();
  if (server < 0) {
    std::perror("fork");
    return 1;
  }
  if (server == 0) {
    // The server answers every trip: it copies the request's bytes back.
    Pin(pin_server);
    alarm(120);  // never left spinning
    shared->ready.store(1, std::memory_order_release);
    for (uint64_t k = 1; k <= static_cast<uint64_t>(total); ++k) {
      if (!Await(shared->to_server, k)) _exit(3);
      std::memcpy(shared->to_client.data, shared->to_server.data, payload);
      shared->to_client.seq.store(k, std::memory_order_release);
    }
    _exit(0);
  }

  Pin(pin_client);
  alarm(120);
  while (shared->ready.load(std::memory_order_acquire) == 0) CpuRelax();
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(iters));
  unsigned char message[56];
  std::memset(message, 0x5a, sizeof(message));
  bool ok = true;
  for (uint64_t k = 1; k <= static_cast<uint64_t>(total) && ok; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(shared->to_server.data, message, payload);
    shared->to_server.seq.store(k, std::memory_order_release);
    ok = Await(shared->to_client, k) &&
         std::memcmp(shared->to_client.data, message, payload) == 0;
    const auto t1 = std::chrono::steady_clock::now();
    if (k > static_cast<uint64_t>(warmup))
      samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
  }
  int status = 0;
  waitpid(server, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "shm_floor: the ping-pong did not complete (server status %d)\n", status);
    return 1;
  }
  double sum = 0;
  int over_10us = 0;
  for (double s : samples) {
    sum += s;
    if (s > 10.0) ++over_10us;
  }
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  std::printf("one_way_us typical=%.3f avg=%.3f p99=%.3f p999=%.3f max=%.3f iters=%zu over_10us=%d\n",
              samples[n / 2], sum / static_cast<double>(n), samples[n * 99 / 100],
              samples[n * 999 / 1000], samples[n - 1], n, over_10us);
  return 0;
}
