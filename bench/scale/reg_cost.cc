// reg_cost: what ibv_reg_mr and ibv_dereg_mr of a large buffer cost (issue
// 17, "memory registration").
//
//   reg_cost [-s SIZE_MIB] [-r REPS]
//
// For each way an application leaves its buffer before registering it
//   untouched  mmap'd, never written (a pool registered up front)
//   zeroed     every byte written with zeros (memset after malloc)
//   filled     every page written with data
// it registers the whole buffer with local write and remote read/write
// access and deregisters it, REPS times on a fresh mapping each time, and
// prints the median and slowest of each. Beside them, the cost of the
// application's own first write to every page of a fresh mapping of the
// same size (`first touch`): on these VMs a fresh page's first write costs
// ~10 us, and a registration that copies a page into a memfd pays that once
// more per page it copies (docs/shm.md).
//
// Runs over whatever libibverbs.so.1 the loader finds: run it with
// LD_LIBRARY_PATH=<build>/lib for softrnic; SOFTRNIC_TRANSPORT=udp gives
// the registration without same-host sharing.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

enum class Fill { kUntouched, kZeroed, kFilled };
const char* Name(Fill f) {
  return f == Fill::kUntouched ? "untouched" : f == Fill::kZeroed ? "zeroed" : "filled";
}

uint8_t* FreshBuffer(size_t size, Fill fill) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* b = static_cast<uint8_t*>(p);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (fill == Fill::kZeroed) std::memset(b, 0, size);
  if (fill == Fill::kFilled)
    for (size_t i = 0; i < size; i += page) b[i] = static_cast<uint8_t>(i / page) | 1;
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  size_t size_mib = 1024;
  int reps = 3;
  for (int opt; (opt = getopt(argc, argv, "s:r:")) != -1;) {
    if (opt == 's') size_mib = std::strtoul(optarg, nullptr, 10);
    else if (opt == 'r') reps = std::atoi(optarg);
    else {
      std::fprintf(stderr, "usage: reg_cost [-s SIZE_MIB] [-r REPS]\n");
      return 2;
    }
  }
  const size_t size = size_mib << 20;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    std::fprintf(stderr, "reg_cost: no RDMA device\n");
    return 1;
  }
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  if (pd == nullptr) {
    std::fprintf(stderr, "reg_cost: cannot open %s\n", ibv_get_device_name(list[0]));
    return 1;
  }
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

  std::vector<double> touch;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    uint8_t* b = FreshBuffer(size, Fill::kFilled);
    touch.push_back(Millis(Clock::now() - t0));
    if (b != nullptr) munmap(b, size);
  }
  std::printf("| buffer (%zu MiB) | ibv_reg_mr ms median (max) | ibv_dereg_mr ms median (max) |\n",
              size_mib);
  std::printf("| --- | --- | --- |\n");
  for (Fill fill : {Fill::kUntouched, Fill::kZeroed, Fill::kFilled}) {
    std::vector<double> reg, dereg;
    for (int i = 0; i < reps; ++i) {
      uint8_t* b = FreshBuffer(size, fill);
      if (b == nullptr) {
        std::perror("reg_cost: mmap");
        return 1;
      }
      const auto t0 = Clock::now();
      ibv_mr* mr = ibv_reg_mr(pd, b, size, access);
      const auto t1 = Clock::now();
      if (mr == nullptr) {
        std::perror("reg_cost: ibv_reg_mr");
        return 1;
      }
      const int rc = ibv_dereg_mr(mr);
      const auto t2 = Clock::now();
      if (rc != 0) {
        std::fprintf(stderr, "reg_cost: ibv_dereg_mr: %d\n", rc);
        return 1;
      }
      reg.push_back(Millis(t1 - t0));
      dereg.push_back(Millis(t2 - t1));
      munmap(b, size);
    }
    std::printf("| %s | %.1f (%.1f) | %.1f (%.1f) |\n", Name(fill), Median(reg), Max(reg),
                Median(dereg), Max(dereg));
  }
  std::printf("| (first touch of every page, no RDMA) | %.1f (%.1f) | |\n", Median(touch),
              Max(touch));
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
