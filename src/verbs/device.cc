// Device discovery, contexts, device/port/GID queries and async events.
//
// softrnic presents exactly one device, "softrnic0", backed by the process's
// engine::Device. It is an Ethernet-link-layer RoCE v2 RNIC with one port.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/device_identity.h"
#include "verbs/async_acks.h"
#include "verbs/device_attr.h"
#include "verbs/internal.h"
#include "log/log.h"

namespace softrnic::verbs {
namespace {

// The device as ibv_get_device_list shows it. Nothing reads _ops (the
// context is created by ibv_open_device here, not by a provider).
ibv_device g_device = [] {
  ibv_device d{};
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;  // RoCE reports IB transport
  std::snprintf(d.name, sizeof(d.name), "%s", eng::kDeviceName);
  std::snprintf(d.dev_name, sizeof(d.dev_name), "%s", eng::kUverbsName);
  std::snprintf(d.dev_path, sizeof(d.dev_path), "/sys/class/infiniband_verbs/%s", eng::kUverbsName);
  std::snprintf(d.ibdev_path, sizeof(d.ibdev_path), "/sys/class/infiniband/%s", eng::kDeviceName);
  return d;
}();

bool IsOurDevice(const ibv_device* d) { return d == &g_device; }

std::shared_ptr<eng::Device> GetEngine() {
  std::string err;
  auto dev = eng::Device::Get(&err);
  if (!dev) {
    SOFTRNIC_LOG(kError, "cannot start the device: %s", err.c_str());
    errno = ENODEV;
  }
  return dev;
}

bool ValidPort(ibv_context* ctx, unsigned port) {
  return port >= 1 && port <= DevOf(ctx)->attr().phys_port_cnt;
}

int QueryPortOp(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) noexcept {
  if (!ctx || !attr) return EINVAL;
  if (!ValidPort(ctx, port)) return EINVAL;
  ibv_port_attr full;
  FillPortAttr(*DevOf(ctx), &full);
  std::memcpy(attr, &full, std::min(len, sizeof(full)));
  return 0;
}

int QueryDeviceExOp(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) noexcept {
  if (!ctx || !attr) return EINVAL;
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof(attr->orig_attr)) return EINVAL;
  ibv_device_attr_ex full;
  std::memset(&full, 0, sizeof(full));
  FillDeviceAttr(DevOf(ctx)->attr(), &full.orig_attr);
  // IB_UVERBS_DEVICE_ATOMIC_WRITE (Linux 6.0's rdma/ib_user_verbs.h, newer
  // than Debian 12's headers): IBV_WR_ATOMIC_WRITE is executed natively.
  constexpr uint64_t kDeviceAtomicWrite = 1ULL << 40;
  full.device_cap_flags_ex = full.orig_attr.device_cap_flags | kDeviceAtomicWrite;
  full.phys_port_cnt_ex = full.orig_attr.phys_port_cnt;
  FillOdpCaps(&full.odp_caps);
  full.max_dm_size = kMaxDeviceMemory;
  std::memcpy(attr, &full, std::min(attr_size, sizeof(full)));
  return 0;
}

}  // namespace

}  // namespace softrnic::verbs

using namespace softrnic::verbs;

// ---- device list ----------------------------------------------------------

SOFTRNIC_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  return NoThrow<ibv_device**>(nullptr, [&]() -> ibv_device** {
    // The list is two pointers; the caller frees it with ibv_free_device_list.
    auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
    if (!list) return FailNull<ibv_device*>(ENOMEM);
    list[0] = &g_device;
    if (num_devices) *num_devices = 1;
    return list;
  });
}

SOFTRNIC_EXPORT void ibv_free_device_list(ibv_device** list) { std::free(list); }

SOFTRNIC_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  return device ? device->name : nullptr;
}

SOFTRNIC_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  if (!IsOurDevice(device)) return 0;
  return NoThrow<__be64>(0, [] {
    auto dev = GetEngine();
    return dev ? static_cast<__be64>(dev->attr().node_guid) : 0;
  });
}

SOFTRNIC_EXPORT int ibv_get_device_index(ibv_device* device) {
  return IsOurDevice(device) ? 0 : -1;
}

// ---- contexts -------------------------------------------------------------

// Async events go to the context that created the object they name
// (engine/queues/async_queue.h). The engine's handle of a CQ, QP or SRQ is the
// ibv object itself (an ibv_cq_ex starts with the ibv_cq fields).
static int RouteAsyncEvent(const eng::AsyncEvent& event) {
  if (event.handle == nullptr) return eng::Device::kDeviceAsyncQueue;
  ibv_context* ctx = nullptr;
  switch (event.type) {
    case eng::AsyncEventType::kCqErr: ctx = static_cast<ibv_cq*>(event.handle)->context; break;
    case eng::AsyncEventType::kSrqErr:
    case eng::AsyncEventType::kSrqLimitReached:
      ctx = static_cast<ibv_srq*>(event.handle)->context;
      break;
    default: ctx = static_cast<ibv_qp*>(event.handle)->context; break;
  }
  return ctx ? ToContext(ctx)->async_queue : eng::Device::kDeviceAsyncQueue;
}

SOFTRNIC_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (!IsOurDevice(device)) return FailNull<ibv_context>(ENODEV);
  const int cmd_fd = NewCommandFd();
  if (cmd_fd < 0) return FailNull<ibv_context>(errno);
  ibv_context* ctx = NewContext(device, cmd_fd);
  if (!ctx) {
    const int err = errno;
    ReleaseCommandFd(cmd_fd);
    errno = err;
  }
  return ctx;
}

ibv_context* softrnic::verbs::NewContext(ibv_device* device, int cmd_fd) {
  return NoThrow<ibv_context*>(nullptr, [&]() -> ibv_context* {
    auto dev = GetEngine();
    if (!dev) return FailNull<ibv_context>(ENODEV);
    auto* c = new (std::nothrow) Context{};
    if (!c) return FailNull<ibv_context>(ENOMEM);
    std::memset(&c->vctx, 0, sizeof(c->vctx));
    const int queue = dev->OpenAsyncQueue();
    if (queue < 0) {
      delete c;
      return FailNull<ibv_context>(-queue);
    }
    dev->SetAsyncRouter(RouteAsyncEvent);
    c->dev = std::move(dev);
    c->async_queue = queue;
    ibv_context* ctx = &c->vctx.context;
    ctx->device = device;
    ctx->cmd_fd = cmd_fd;  // no kernel uverbs device behind it: see NewCommandFd
    ctx->async_fd = c->dev->async_fd(queue);
    ctx->num_comp_vectors = 1;
    pthread_mutex_init(&ctx->mutex, nullptr);
    // The sentinel tells verbs_get_ctx() that a verbs_context precedes us.
    ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
    c->vctx.sz = sizeof(verbs_context);
    c->vctx.query_port = QueryPortOp;
    c->vctx.query_device_ex = QueryDeviceExOp;
    InstallPostOps(&ctx->ops);
    InstallCqOps(&c->vctx);
    InstallQpOps(&c->vctx);
    InstallMrOps(&c->vctx);
    InstallDmOps(&c->vctx);
    InstallDomainOps(&c->vctx);
    InstallXrcOps(&c->vctx);
    return ctx;
  });
}

SOFTRNIC_EXPORT int ibv_close_device(ibv_context* ctx) {
  if (!ctx) return EINVAL;
  Context* c = ToContext(ctx);
  pthread_mutex_destroy(&ctx->mutex);
  c->dev->CloseAsyncQueue(c->async_queue);
  ReleaseCommandFd(ctx->cmd_fd);
  delete c;  // drops our reference to the engine device
  return 0;
}

// ---- queries --------------------------------------------------------------

SOFTRNIC_EXPORT int ibv_query_device(ibv_context* ctx, ibv_device_attr* attr) {
  if (!ctx || !attr) return EINVAL;
  return NoThrow<int>(ENOMEM, [&] {
    FillDeviceAttr(DevOf(ctx)->attr(), attr);
    return 0;
  });
}

// The exported symbol takes the 48-byte pre-link_layer-extension struct (the
// inline ibv_query_port only calls it when vctx->query_port is absent): write
// exactly that much.
SOFTRNIC_EXPORT int ibv_query_port(ibv_context* ctx, uint8_t port,
                                   struct _compat_ibv_port_attr* attr) {
  static_assert(offsetof(ibv_port_attr, port_cap_flags2) == 48);
  return QueryPortOp(ctx, port, reinterpret_cast<ibv_port_attr*>(attr), 48);
}

SOFTRNIC_EXPORT int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, union ibv_gid* gid) {
  if (!ctx || !gid || !ValidPort(ctx, port)) {
    errno = EINVAL;
    return -1;
  }
  auto gids = DevOf(ctx)->gids();
  if (index < 0 || static_cast<size_t>(index) >= gids.size()) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(gid->raw, gids[index].raw.data(), 16);
  return 0;
}

SOFTRNIC_EXPORT int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index,
                                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (!ctx || !entry || flags || !ValidPort(ctx, port)) return EINVAL;
  ibv_gid_entry e;
  // ENODATA as rdma-core answers for an empty slot.
  if (!FillGidEntry(*DevOf(ctx), port, index, &e)) return ENODATA;
  std::memcpy(entry, &e, std::min(entry_size, sizeof(e)));
  return 0;
}

SOFTRNIC_EXPORT ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries,
                                             size_t max_entries, uint32_t flags,
                                             size_t entry_size) {
  if (!ctx || (!entries && max_entries) || flags || entry_size < sizeof(ibv_gid_entry))
    return -EINVAL;
  auto gids = DevOf(ctx)->gids();
  if (gids.size() > max_entries) return -EINVAL;
  auto* out = reinterpret_cast<char*>(entries);
  for (uint32_t i = 0; i < gids.size(); ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(out + i * entry_size);
    std::memset(e, 0, entry_size);
    FillGidEntry(*DevOf(ctx), 1, i, e);
  }
  return static_cast<ssize_t>(gids.size());
}

// rdma-core's private enum ibv_gid_type_sysfs (driver.h is not installed).
enum SysfsGidType : int { kSysfsIbRoceV1 = 0, kSysfsRoceV2 = 1 };

// IBVERBS_PRIVATE_34: ibv_devinfo prints "RoCE v2" for each GID from this.
SOFTRNIC_EXPORT int ibv_query_gid_type(ibv_context* ctx, uint8_t port, unsigned int index,
                                       int* type) {
  if (!ctx || !type || !ValidPort(ctx, port) || index >= DevOf(ctx)->gids().size()) {
    errno = EINVAL;
    return -1;
  }
  *type = kSysfsRoceV2;
  return 0;
}

SOFTRNIC_EXPORT int ibv_query_pkey(ibv_context* ctx, uint8_t port, int index, __be16* pkey) {
  if (!ctx || !pkey || !ValidPort(ctx, port) || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = 0xffff;  // the default full-membership P_Key, same in either byte order
  return 0;
}

SOFTRNIC_EXPORT int ibv_get_pkey_index(ibv_context* ctx, uint8_t port, __be16 pkey) {
  if (!ctx || !ValidPort(ctx, port)) {
    errno = EINVAL;
    return -1;
  }
  // Full (0xffff) and limited (0x7fff) membership of the default partition.
  if ((pkey & 0xff7f) == 0xff7f) return 0;
  errno = ENOENT;
  return -1;
}

// ---- async events ---------------------------------------------------------

SOFTRNIC_EXPORT int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  if (!ctx || !event) {
    errno = EINVAL;
    return -1;
  }
  return NoThrow<int>(-1, [&] {
    eng::AsyncEvent ev;
    int rc = DevOf(ctx)->GetAsyncEvent(&ev, ToContext(ctx)->async_queue);
    if (rc) {
      errno = rc;
      return -1;
    }
    event->event_type = static_cast<ibv_event_type>(ev.type);
    switch (ev.type) {
      case eng::AsyncEventType::kCqErr:
        event->element.cq = static_cast<ibv_cq*>(ev.handle);
        break;
      case eng::AsyncEventType::kQpFatal:
      case eng::AsyncEventType::kQpReqErr:
      case eng::AsyncEventType::kQpAccessErr:
      case eng::AsyncEventType::kCommEst:
      case eng::AsyncEventType::kSqDrained:
      case eng::AsyncEventType::kPathMig:
      case eng::AsyncEventType::kPathMigErr:
      case eng::AsyncEventType::kQpLastWqeReached:
        event->element.qp = static_cast<ibv_qp*>(ev.handle);
        break;
      case eng::AsyncEventType::kSrqErr:
      case eng::AsyncEventType::kSrqLimitReached:
        event->element.srq = static_cast<ibv_srq*>(ev.handle);
        break;
      case eng::AsyncEventType::kWqFatal:
        event->element.wq = static_cast<ibv_wq*>(ev.handle);
        break;
      default:
        event->element.port_num = ev.port;
        break;
    }
    return 0;
  });
}

// ibv_get_async_event(3): every event of a QP, CQ or SRQ must be
// acknowledged; ibv_destroy_* waits for it, so the handle the application
// holds stays valid until then (M6, docs/security.md).
SOFTRNIC_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  if (!event) return;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      CountAsyncAck(event->element.cq, &event->element.cq->async_events_completed);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      CountAsyncAck(event->element.qp, &event->element.qp->events_completed);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      CountAsyncAck(event->element.srq, &event->element.srq->events_completed);
      break;
    default:
      break;  // port and device events name no object
  }
}

// ---- fork -----------------------------------------------------------------

// Memory is never pinned by a kernel driver, so fork needs no protection.
SOFTRNIC_EXPORT int ibv_fork_init(void) { return 0; }
SOFTRNIC_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
SOFTRNIC_EXPORT int ibv_dontfork_range(void*, size_t) { return 0; }
SOFTRNIC_EXPORT int ibv_dofork_range(void*, size_t) { return 0; }

// ---- sysfs (rdma-core internals some old code calls) -----------------------

SOFTRNIC_EXPORT const char* ibv_get_sysfs_path(void) { return "/sys"; }

// There is no sysfs device behind softrnic: report "no such file".
SOFTRNIC_EXPORT int ibv_read_sysfs_file(const char*, const char*, char*, size_t) {
  errno = ENOENT;
  return -1;
}

