/*
 * The plugin of it_verbs_dlclose (dlclose.c): a shared object linking
 * libibverbs and librdmacm, as a storage or MPI plugin does, that the test
 * loads and unloads again and again. plugin_traffic() moves verified data
 * over a loopback RC pair and starts the CM's thread with a listener; then
 * it either tears everything down or, when asked, leaves the device open
 * with a WRITE in flight (plugins that never close their device are common)
 * and hands what it leaves to the caller (`keep`: every handle, so that
 * LeakSanitizer sees them reachable and nothing is lost track of).
 */
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include "verbs_test_util.h"

#define SIZE 8192

static int fail(int iteration, const char *what) {
  fprintf(stderr, "iteration %d: %s failed\n", iteration, what);
  return 1;
}

/* 0 when every byte arrived; leaves the device open when leave_open. */
__attribute__((visibility("default"))) int plugin_traffic(int iteration, int leave_open,
                                                          void **keep) {
  struct loopback l;
  if (loopback_open(&l, SIZE) != 0) return fail(iteration, "loopback pair");
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *id = NULL;
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
      rdma_bind_addr(id, (struct sockaddr *)&sa) || rdma_listen(id, 1))
    return fail(iteration, "rdma_listen");
  /* Two WRITEs: the first waited for and verified, the second (left open
   * only) still in flight when the caller unloads this plugin. */
  if (loopback_write(&l, (uint8_t)(iteration * 2 + 1), 1) != 0)
    return fail(iteration, "first WRITE");
  if (loopback_write(&l, (uint8_t)(iteration * 2 + 2), !leave_open) != 0)
    return fail(iteration, "second WRITE");
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  if (leave_open) {
    struct loopback *kept = malloc(sizeof *kept);
    if (!kept) return fail(iteration, "malloc");
    *kept = l;
    *keep = kept;
    return 0;
  }
  loopback_close(&l);
  return 0;
}
