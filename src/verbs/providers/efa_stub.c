/* Stand-in libefa.so.1 for softrnic.
 *
 * perftest links libefa.so.1 and imports efadv_*; it calls them only on AWS
 * EFA devices, which softrnic is not. The real libefa cannot be loaded next
 * to softrnic's libibverbs (it registers a provider through private
 * libibverbs symbols), so this library only lets such binaries load. Every
 * function reports "not supported".
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/efadv.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr,
                              uint32_t inlen) {
  (void)ibvctx;
  (void)attr;
  (void)inlen;
  return EOPNOTSUPP;
}

EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
                                         struct ibv_qp_init_attr_ex *attr_ex,
                                         struct efadv_qp_init_attr *efa_attr, uint32_t inlen) {
  (void)ibvctx;
  (void)attr_ex;
  (void)efa_attr;
  (void)inlen;
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen) {
  (void)ibvah;
  (void)attr;
  (void)inlen;
  return EOPNOTSUPP;
}
