/* A small MPI program of softrnic's own, run by Open MPI and MPICH over
 * UCX restricted to softrnic's transports (test_mpi.sh). Every check
 * verifies data; the program fails (exit 1 on rank 0, MPI_Abort elsewhere)
 * on the first wrong byte.
 *
 *   1. point-to-point ring: each rank sends to rank+1 and receives from
 *      rank-1 messages of 8 B, 8 KiB (eager) and 1 MiB (rendezvous), with a
 *      pattern that names sender, size and round;
 *   2. MPI_Allreduce (sum) of a 64 Ki-element vector;
 *   3. one-sided, passive target: each rank MPI_Puts a block into every
 *      other rank's window under MPI_Win_lock(EXCLUSIVE), then, after a
 *      barrier, MPI_Gets every block of its right neighbour's window under
 *      MPI_Win_lock(SHARED) and checks who wrote it.
 *
 * Prints "mpi_check: PASS ranks=N bytes=B" on rank 0, B being the bytes
 * every rank together handed to MPI for other ranks (the test compares it
 * with softrnic's counters). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static uint64_t bytes_to_others;

static void fail(const char* what, long at) {
  fprintf(stderr, "mpi_check: FAIL rank %d: %s (at %ld)\n", rank, what, at);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static uint8_t pattern(int writer, size_t size, int round, size_t i) {
  return (uint8_t)(writer * 131 + size * 7 + round * 17 + i * 29 + (i >> 8));
}

static void ring(void) {
  static const size_t sizes[] = {8, 8192, 1 << 20};
  const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    const size_t n = sizes[s];
    uint8_t* out = malloc(n);
    uint8_t* in = malloc(n);
    if (!out || !in) fail("malloc", (long)n);
    for (int round = 0; round < 10; ++round) {
      for (size_t i = 0; i < n; ++i) out[i] = pattern(rank, n, round, i);
      memset(in, 0, n);
      MPI_Sendrecv(out, (int)n, MPI_BYTE, right, round, in, (int)n, MPI_BYTE, left, round,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (right != rank) bytes_to_others += n;
      for (size_t i = 0; i < n; ++i)
        if (in[i] != pattern(left, n, round, i)) fail("ring: wrong byte", (long)i);
    }
    free(out);
    free(in);
  }
}

static void allreduce(void) {
  enum { kCount = 64 * 1024 };
  int64_t* v = malloc(kCount * sizeof *v);
  int64_t* sum = malloc(kCount * sizeof *sum);
  if (!v || !sum) fail("malloc", kCount);
  for (int i = 0; i < kCount; ++i) v[i] = (int64_t)rank * 1000003 + i;
  MPI_Allreduce(v, sum, kCount, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  bytes_to_others += (uint64_t)kCount * sizeof *v;  /* at least one copy leaves */
  const int64_t ranks_sum = (int64_t)nranks * (nranks - 1) / 2;
  for (int i = 0; i < kCount; ++i)
    if (sum[i] != ranks_sum * 1000003 + (int64_t)i * nranks) fail("allreduce: wrong sum", i);
  free(v);
  free(sum);
}

static void one_sided(void) {
  enum { kBlock = 64 * 1024 };
  uint8_t* base;
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)kBlock * nranks, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  memset(base, 0xEE, (size_t)kBlock * nranks);
  MPI_Barrier(MPI_COMM_WORLD);
  uint8_t* block = malloc(kBlock);
  if (!block) fail("malloc", kBlock);
  for (size_t i = 0; i < kBlock; ++i) block[i] = pattern(rank, kBlock, 99, i);
  /* Passive target: the target makes no MPI call while this runs. */
  for (int t = 0; t < nranks; ++t) {
    if (t == rank) continue;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
    MPI_Put(block, kBlock, MPI_BYTE, t, (MPI_Aint)kBlock * rank, kBlock, MPI_BYTE, win);
    MPI_Win_unlock(t, win);
    bytes_to_others += kBlock;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const int right = (rank + 1) % nranks;
  uint8_t* got = malloc((size_t)kBlock * nranks);
  if (!got) fail("malloc", kBlock);
  MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
  MPI_Get(got, kBlock * nranks, MPI_BYTE, right, 0, kBlock * nranks, MPI_BYTE, win);
  MPI_Win_unlock(right, win);
  for (int w = 0; w < nranks; ++w) {
    const uint8_t* b = got + (size_t)kBlock * w;
    for (size_t i = 0; i < kBlock; ++i) {
      /* Nobody writes its own block of a window; that one keeps its fill. */
      const uint8_t want = w == right ? 0xEE : pattern(w, kBlock, 99, i);
      if (b[i] != want) fail("one-sided: wrong byte", (long)(w * kBlock + i));
    }
  }
  free(block);
  free(got);
  MPI_Win_free(&win);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  ring();
  allreduce();
  one_sided();
  uint64_t total = 0;
  MPI_Reduce(&bytes_to_others, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_check: PASS ranks=%d bytes=%llu\n", nranks, (unsigned long long)total);
  MPI_Finalize();
  return 0;
}
