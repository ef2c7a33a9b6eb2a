/* Stand-in libmlx5.so.1 for softrnic.
 *
 * perftest links libmlx5.so.1 and imports these mlx5dv_* functions; it calls
 * them only on ConnectX devices (it decides by vendor_part_id), which
 * softrnic never claims to be. The real libmlx5 cannot be loaded next to
 * softrnic's libibverbs (its constructor registers a provider through ~60
 * private libibverbs symbols), so this library exists to let such binaries
 * load. Every function reports "not supported".
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include <infiniband/mlx5dv.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT bool mlx5dv_is_supported(struct ibv_device *device) {
  (void)device;
  return false; /* not an mlx5 device */
}

EXPORT int mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *attrs_out) {
  (void)ctx;
  (void)attrs_out;
  return EOPNOTSUPP;
}

EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
                                              struct mlx5dv_context_attr *attr) {
  (void)device;
  (void)attr;
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
                                       struct ibv_qp_init_attr_ex *qp_attr,
                                       struct mlx5dv_qp_init_attr *mlx5_qp_attr) {
  (void)context;
  (void)qp_attr;
  (void)mlx5_qp_attr;
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp) {
  (void)qp;
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *mkey_init_attr) {
  (void)mkey_init_attr;
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey) {
  (void)mkey;
  return EOPNOTSUPP;
}

EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *context, const void *in, size_t inlen,
                                   void *out, size_t outlen) {
  (void)context;
  (void)in;
  (void)inlen;
  (void)out;
  (void)outlen;
  return EOPNOTSUPP;
}

EXPORT int mlx5dv_crypto_login(struct ibv_context *context,
                               struct mlx5dv_crypto_login_attr *login_attr) {
  (void)context;
  (void)login_attr;
  return EOPNOTSUPP;
}

EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context,
                                            struct mlx5dv_dek_init_attr *init_attr) {
  (void)context;
  (void)init_attr;
  errno = EOPNOTSUPP;
  return NULL;
}

EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek) {
  (void)dek;
  return EOPNOTSUPP;
}
