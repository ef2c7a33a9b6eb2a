/*
 * Unloading a plugin that links softrnic's libibverbs and librdmacm (issue
 * 44): the libraries stay loaded (-z nodelete, src/verbs/CMakeLists.txt),
 * so their threads never run on unmapped code.
 *
 *   it_verbs_dlclose PLUGIN.so
 *
 * This program does not link libibverbs itself: the plugin holds the only
 * reference, so each dlclose() would unload the libraries if they allowed
 * it. ITERATIONS times: dlopen the plugin, run its traffic (verified WRITEs
 * over a loopback RC pair, an rdma_cm listener), dlclose it, and let the
 * libraries' threads run for a while before the next load. Every KEEP_EVERY
 * iterations the plugin leaves its device open with a WRITE in flight, as
 * plugins that never close do; what it leaves is kept here. The test passes
 * if every iteration's data arrived and the process exits 0 (under the CI
 * build, with AddressSanitizer watching every access).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERATIONS 100
#define KEEP_EVERY 10

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
    return 2;
  }
  static void *kept[ITERATIONS / KEEP_EVERY + 1];
  int n_kept = 0;
  for (int i = 0; i < ITERATIONS; ++i) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    int (*traffic)(int, int, void **) = (int (*)(int, int, void **))dlsym(h, "plugin_traffic");
    if (!traffic) {
      fprintf(stderr, "dlsym: %s\n", dlerror());
      return 1;
    }
    const int leave_open = i % KEEP_EVERY == KEEP_EVERY - 1;
    if (traffic(i, leave_open, &kept[n_kept]) != 0) return 1;
    if (leave_open) ++n_kept;
    if (dlclose(h) != 0) {
      fprintf(stderr, "dlclose: %s\n", dlerror());
      return 1;
    }
    /* The libraries' threads (engine, CM, stats) run on meanwhile. */
    struct timespec t = {0, 2 * 1000 * 1000};
    nanosleep(&t, NULL);
  }
  printf("%d loads and unloads, %d devices left open by the plugin\n", ITERATIONS, n_kept);
  return 0;
}
