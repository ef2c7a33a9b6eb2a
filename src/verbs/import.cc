// Sharing verbs objects between contexts: ibv_import_device,
// ibv_import_pd / ibv_unimport_pd, ibv_import_mr / ibv_unimport_mr.
//
// With a kernel driver a context's cmd_fd is an open uverbs file and every
// object lives in the kernel, so another context (of this process, or of
// another one the fd was passed to) can import objects by handle. softrnic's
// objects live in the engine of this process: a dup() of a context's cmd_fd
// imports the device within the process (what rdma-core's own test suite
// and applications that split one device between libraries do); an fd of
// another process, or any other file, is refused with EOPNOTSUPP, as the
// man page says for a device that cannot be imported.
//
// An imported PD or MR is a second name for the same engine object: its
// handle, keys and range are the original's; ibv_unimport_* forgets the
// name, ibv_dealloc_pd / ibv_dereg_mr on either name destroys the object
// (as the kernel's shared object would be).
#include <cerrno>

#include "verbs/internal.h"

using namespace softrnic::verbs;

// ibv_import_device(3): the new context owns `cmd_fd` (closed by
// ibv_close_device).
SOFTRNIC_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  if (!IsCommandFd(cmd_fd)) return FailNull<ibv_context>(EOPNOTSUPP);
  if (!RetainCommandFd(cmd_fd)) return FailNull<ibv_context>(EBADF);
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  ibv_context* ctx = list && num > 0 ? NewContext(list[0], cmd_fd) : nullptr;
  const int err = errno;
  if (list) ibv_free_device_list(list);
  if (!ctx) {
    DropCommandFd(cmd_fd);
    errno = err ? err : ENODEV;
  }
  return ctx;
}

SOFTRNIC_EXPORT ibv_pd* ibv_import_pd(ibv_context* ctx, uint32_t pd_handle) {
  if (!ctx) return FailNull<ibv_pd>(EINVAL);
  eng::Pd* e = DevOf(ctx)->FindPd(pd_handle);
  if (!e) return FailNull<ibv_pd>(ENOENT);
  auto* pd = new (std::nothrow) Pd{};
  if (!pd) return FailNull<ibv_pd>(ENOMEM);
  pd->pd.context = ctx;
  pd->pd.handle = pd_handle;
  pd->e = e;
  pd->imported = true;
  return &pd->pd;
}

SOFTRNIC_EXPORT void ibv_unimport_pd(ibv_pd* ibpd) {
  auto* pd = reinterpret_cast<Pd*>(ibpd);
  if (pd && pd->imported) delete pd;
}

SOFTRNIC_EXPORT ibv_mr* ibv_import_mr(ibv_pd* ibpd, uint32_t mr_handle) {
  if (!ibpd) return FailNull<ibv_mr>(EINVAL);
  eng::Device* dev = DevOf(ibpd->context);
  eng::Mr* e = dev->FindMr(reinterpret_cast<Pd*>(ibpd)->e, mr_handle);
  if (!e) return FailNull<ibv_mr>(ENOENT);
  auto* mr = new (std::nothrow) Mr{};
  if (!mr) return FailNull<ibv_mr>(ENOMEM);
  mr->e = e;
  mr->imported = true;
  mr->mr.context = ibpd->context;
  mr->mr.pd = ibpd;
  mr->mr.lkey = dev->MrLkey(e);
  mr->mr.rkey = dev->MrRkey(e);
  mr->mr.handle = mr_handle;
  dev->MrRange(e, &mr->mr.addr, &mr->mr.length);
  return &mr->mr;
}

SOFTRNIC_EXPORT void ibv_unimport_mr(ibv_mr* ibmr) {
  auto* mr = reinterpret_cast<Mr*>(ibmr);
  if (mr && mr->imported) delete mr;
}
