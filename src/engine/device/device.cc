// Device: the locked facade over Engine. Argument checks that the verbs man
// pages specify live here; protocol work lives in the engine files.
#include "engine/device/device.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>

#include "engine/device/device_internal.h"
#include "engine/engine.h"
#include "engine/memory/odp.h"
#include "engine/observe/stats_publisher.h"
#include "engine/wr_opcode.h"
#include "transport/factory.h"

namespace softrnic::engine {
namespace {

std::mutex g_device_mu;
// Deliberately never destroyed: the progress thread may still run while
// static destructors do, and a forked child must not touch the parent's.
std::shared_ptr<Device>* g_device = nullptr;
pid_t g_device_pid = 0;

}  // namespace

// Blocking read of one byte honouring the descriptor's O_NONBLOCK flag. A
// signal interrupts the wait with EINTR, as rdma-core's ibv_get_cq_event
// does (qperf ends its tests with SIGALRM and relies on it).
int ReadEventByte(int fd) {
  char byte;
  const ssize_t r = read(fd, &byte, 1);
  if (r == 1) return 0;
  if (r < 0) return errno;
  return EIO;
}


std::shared_ptr<Device> Device::Get(std::string* error) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  if (g_device != nullptr && g_device_pid == getpid()) return *g_device;
  // First use, or first use in a forked child: build a device of our own,
  // configured by the environment as it is now (docs/configuration.md).
  // SOFTRNIC_TRANSPORT selects the packet path (udp | shm | auto, see
  // transport.h). Anything else is refused loudly rather than silently
  // measured on the wrong path.
  EngineConfig config;
  if (std::string msg;
      !EngineConfig::FromEnvironment(config::Environment::FromProcess(), &config, &msg)) {
    std::fprintf(stderr, "%s\n", msg.c_str());
    if (error) *error = msg;
    return nullptr;
  }
  auto device = Create(config, error);
  if (!device) return nullptr;
  g_device = new std::shared_ptr<Device>(device);
  g_device_pid = getpid();
  // At exit, send the ACKs still deferred (ack_delay.cc), then give
  // destroyed QPs their linger time (Engine::Lingering): the progress
  // thread keeps answering duplicates until they expire.
  std::atexit([] {
    if (g_device == nullptr || g_device_pid != getpid()) return;
    Engine& e = (*g_device)->engine();
    {
      SpinLock engine_lock(e.mu_);
      e.FlushDeferredAcksLocked();
    }
    for (int i = 0; i < 100; ++i) {
      {
        SpinLock engine_lock(e.mu_);
        if (!e.ExpireLingeringLocked(Clock::now())) return;
      }
      usleep(5000);
    }
  });
  // Counters readable while running: /dev/shm/softrnic-<pid>.stats, read by
  // `softrnic stat` (tools/softrnic_stat.cc).
  StatsPublisher::StartForProcess(*device);
  if (config.stats_at_exit) {
    // SOFTRNIC_STATS=1: print the counters when the process exits.
    std::atexit([] {
      if (g_device == nullptr || g_device_pid != getpid()) return;
      std::fprintf(stderr, "%s", FormatStats((*g_device)->stats(),
                                             (*g_device)->transport_counters()).c_str());
    });
  }
  return *g_device;
}

std::shared_ptr<Device> Device::Create(const transport::UdpConfig& udp, std::string* error) {
  // Everything but the UDP configuration from the environment (an unknown
  // SOFTRNIC_TRANSPORT means auto here), so the engine tests run over
  // either path.
  EngineConfig config = EngineConfig::FromProcess();
  config.udp = udp;
  return Create(config, error);
}

std::shared_ptr<Device> Device::Create(const EngineConfig& config, std::string* error) {
  std::string err;
  auto transport = transport::CreateTransport(config.udp, config.transport_mode, &err);
  if (!transport) {
    if (error) *error = "softrnic: cannot open UDP transport: " + err;
    return nullptr;
  }
  return Create(std::move(transport), config);
}

std::shared_ptr<Device> Device::Create(std::unique_ptr<transport::Transport> transport,
                                       const EngineConfig& config) {
  DeviceAttr attr;
  auto engine = std::make_unique<Engine>(std::move(transport), attr, config);
  engine->StartProgressThread();
  return std::shared_ptr<Device>(new Device(std::move(engine)));
}

Device::Device(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
Device::~Device() { engine_->StopProgressThread(); }

std::optional<transport::ShmPathVerdict> Device::ExplainPath(const Gid& dst) {
  SpinLock lock(engine_->mu_);
  if (engine_->peer_memory() == nullptr) return std::nullopt;
  return engine_->peer_memory()->ExplainPath(transport::Endpoint{dst, engine_->udp_port()});
}

bool Device::shared_memory() const { return engine_->peer_memory() != nullptr; }
bool Device::direct_operations() const { return engine_->shm_direct() != nullptr; }
uint16_t Device::udp_port() const { return engine_->udp_port(); }
int Device::host_nic_lane() const { return engine_->qpn_lane(); }
int Device::ClaimCmService(uint16_t port_space, uint16_t port, bool claim) {
  SpinLock lock(engine_->mu_);
  return engine_->ClaimCmServiceLocked(port_space, port, claim);
}
int Device::seal_mode() const { return engine_->seal_mode(); }
int Device::SealQpByCm(Qp* qp, std::span<const uint8_t> exchanged,
                       std::span<const uint8_t> transcript) {
  if (qp == nullptr) return EINVAL;
  SpinLock lock(engine_->mu_);
  return engine_->SealQpByCmLocked(qp, exchanged, transcript);
}

const std::string& Device::name() const { return engine_->name(); }
const DeviceAttr& Device::attr() const { return engine_->attr(); }
std::span<const Gid> Device::gids() const { return engine_->gids(); }

int Device::AllocPd(void* handle, Pd** out) {
  SpinLock lock(engine_->mu_);
  return engine_->AddPdLocked(handle, out);
}

int Device::DeallocPd(Pd* pd) {
  SpinLock lock(engine_->mu_);
  return engine_->RemovePdLocked(pd);
}

namespace {

// The checks of a registration's attributes, shared by RegMr and ReregMr.
int CheckRegistration(const DeviceAttr& attr, const void* addr, size_t length, uint32_t access) {
  // IBA 10.6.3.1 (man ibv_reg_mr): remote write or remote atomic requires
  // local write.
  if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite)) return EINVAL;
  if (access & ~uint32_t{kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic | kMwBind |
                         kZeroBased | kOnDemand})
    return EINVAL;
  // Implicit ODP (ibv_reg_mr(3)): address NULL, length SIZE_MAX, the whole
  // address space at its own addresses, so never zero-based.
  if (addr == nullptr && length == kImplicitOdpLength && (access & kOnDemand))
    return (access & kZeroBased) ? EINVAL : 0;
  if (length > attr.max_mr_size) return EINVAL;
  if (addr == nullptr && length > 0) return EINVAL;
  return 0;
}

// A region with local write but no remote right is shared only up to this
// size: sharing copies the pages that hold data (seconds per GiB of a
// filled buffer here, docs/benchmarks.md), a price an application that
// registers a large local-only buffer never asked for. Receive buffers
// beyond it take their SENDs as packets.
constexpr size_t kShareLocalOnlyUpTo = size_t{64} << 20;

// Same-host peers reach a region's pages directly (shm_memory.h) if it
// grants a remote right, or local write: a receive buffer, which a peer's
// direct SEND fills (shm_direct_send.cc). Called before taking the engine
// lock: it reads /proc/self/maps and copies.
SharedRange ShareIfReachable(bool shm_direct, const void* addr, size_t length, uint32_t access) {
  // An ODP region is never moved into a memfd: its pages may not exist yet
  // (or ever); same-host peers reach it through packets (engine/memory/odp.h).
  if (access & kOnDemand) return {};
  if (!shm_direct) return {};
  const bool remote = (access & (kRemoteWrite | kRemoteRead | kRemoteAtomic)) != 0;
  const bool receive_buffer = (access & kLocalWrite) && length <= kShareLocalOnlyUpTo;
  if (!remote && !receive_buffer) return {};
  return ShareRegion(addr, length);
}

}  // namespace

int Device::RegMr(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access, void* handle,
                  Mr** out) {
  if (int rc = CheckRegistration(engine_->attr(), addr, length, access)) return rc;
  auto mr = std::make_unique<Mr>();
  mr->share = ShareIfReachable(engine_->shm_direct() != nullptr, addr, length, access);
  mr->pd = pd;
  mr->addr = static_cast<uint8_t*>(addr);
  mr->length = length;
  mr->iova = (access & kZeroBased) ? 0 : iova;
  mr->access = access;
  mr->handle = handle;
  Mr* const made = mr.get();
  int rc;
  {
    SpinLock lock(engine_->mu_);
    rc = engine_->AddMrLocked(mr);
  }
  if (rc == 0) {
    *out = made;
    return 0;
  }
  UnshareRegion(mr->share);  // mr is still ours, and freed here
  return rc;
}

int Device::ReregMr(Mr* mr, uint32_t what, Pd* pd, void* addr, size_t length, uint32_t access) {
  // The new attributes. The fields read here change only in ReregMr, which
  // the application must not run concurrently on one MR (as dereg).
  Engine::MrTranslation next;
  next.pd = (what & kReregPd) ? pd : mr->pd;
  void* const new_addr = (what & kReregTranslation) ? addr : static_cast<void*>(mr->addr);
  next.addr = static_cast<uint8_t*>(new_addr);
  next.length = (what & kReregTranslation) ? length : mr->length;
  next.access = (what & kReregAccess) ? access : mr->access;
  if (next.pd == nullptr) return EINVAL;
  if (int rc = CheckRegistration(engine_->attr(), new_addr, next.length, next.access)) return rc;
  next.iova = mr->iova;
  if ((what & kReregTranslation) || ((mr->access ^ next.access) & kZeroBased))
    next.iova = reinterpret_cast<uintptr_t>(new_addr);
  if (next.access & kZeroBased) next.iova = 0;
  // The new range is shared while the old one still is: the same pages, or
  // pages nested in it, reuse the old share without a copy (shm_memory.h).
  next.share = ShareIfReachable(engine_->shm_direct() != nullptr, new_addr, next.length, next.access);
  SharedRange old_share;
  {
    SpinLock lock(engine_->mu_);
    old_share = engine_->ReregMrLocked(mr, next);
  }
  // The old pages go back to private memory unless the new range (or
  // another registration) still uses them.
  UnshareRegion(old_share);
  return 0;
}

int Device::DeregMr(Mr* mr) {
  SharedRange share;
  {
    SpinLock lock(engine_->mu_);
    if (const int rc = engine_->RemoveMrLocked(mr, &share)) return rc;
  }
  // The pages go back to private memory once no registration uses them.
  UnshareRegion(share);
  return 0;
}

uint32_t Device::MrLkey(const Mr* mr) const { return mr->lkey; }
uint32_t Device::MrRkey(const Mr* mr) const { return mr->rkey; }

int Device::CreateAh(Pd* pd, const AddressVector& av, void* handle, Ah** out) {
  // RoCE needs a GRH: the GID is the address (IBA A17.4.5.1).
  if (!av.is_global || av.sgid_index >= engine_->gids().size() || av.port_num != 1) return EINVAL;
  SpinLock lock(engine_->mu_);
  return engine_->AddAhLocked(pd, av, handle, out);
}

int Device::DestroyAh(Ah* ah) {
  SpinLock lock(engine_->mu_);
  return engine_->RemoveAhLocked(ah);
}

int Device::CreateQp(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, QpCaps* caps,
                     bool sq_sig_all, void* handle, Qp** out,
                     std::pmr::memory_resource* queue_memory) {
  return CreateQpWithQpn(pd, type, send_cq, recv_cq, srq, caps, sq_sig_all, handle, 0, out,
                         nullptr, queue_memory);
}

int Device::CreateGsiQp(Pd* pd, Cq* send_cq, Cq* recv_cq, QpCaps* caps, void* handle, Qp** out) {
  return CreateQpWithQpn(pd, QpType::kUd, send_cq, recv_cq, nullptr, caps, false, handle, 1, out);
}

int Device::CreateQpWithQpn(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq,
                            QpCaps* caps, bool sq_sig_all, void* handle, uint32_t fixed_qpn,
                            Qp** out, Xrcd* xrcd, std::pmr::memory_resource* queue_memory) {
  const auto& dev = engine_->attr();
  if (type != QpType::kRc && type != QpType::kUc && type != QpType::kUd &&
      type != QpType::kXrcSend && type != QpType::kXrcRecv)
    return EOPNOTSUPP;
  // XRC (qp.h, XrcRole): a send QP has no receive side, a receive QP no
  // queues, PD or CQs of its own.
  const XrcRole xrc = type == QpType::kXrcSend   ? XrcRole::kSend
                      : type == QpType::kXrcRecv ? XrcRole::kRecv
                                                 : XrcRole::kNone;
  if (xrc == XrcRole::kRecv) {
    if (xrcd == nullptr) return EINVAL;
    *caps = QpCaps{};
  } else if (xrc == XrcRole::kSend) {
    if (pd == nullptr || send_cq == nullptr) return EINVAL;
    recv_cq = nullptr;
    srq = nullptr;
    caps->max_recv_wr = caps->max_recv_sge = 0;
  } else if (send_cq == nullptr || recv_cq == nullptr) {
    return EINVAL;
  }
  if (caps->max_send_wr > dev.max_qp_wr || caps->max_send_sge > dev.max_sge ||
      caps->max_inline_data > dev.max_inline_data)
    return EINVAL;
  if (srq == nullptr && (caps->max_recv_wr > dev.max_qp_wr || caps->max_recv_sge > dev.max_sge))
    return EINVAL;
  // Round up as hardware does; at least one of each so rings are valid.
  caps->max_send_wr = std::max<uint32_t>(caps->max_send_wr, 1);
  caps->max_send_sge = std::max<uint32_t>(caps->max_send_sge, 1);
  if (srq || xrc != XrcRole::kNone) {
    caps->max_recv_wr = 0;
    caps->max_recv_sge = 0;
  } else {
    caps->max_recv_wr = std::max<uint32_t>(caps->max_recv_wr, 1);
    caps->max_recv_sge = std::max<uint32_t>(caps->max_recv_sge, 1);
  }
  // The queues are allocated before the lock (device.h, queue memory); on
  // an error below, `qp` frees them after the lock is released (declared
  // first, destroyed last).
  std::unique_ptr<Qp> qp;
  try {
    qp = std::make_unique<Qp>(QueueMemoryOrDefault(queue_memory));
    qp->caps = *caps;
    qp->sq.resize(caps->max_send_wr);
    qp->sq_sges.resize(size_t{caps->max_send_wr} * qp->SgeStride());
    qp->sq_inline.resize(size_t{caps->max_send_wr} * caps->max_inline_data);
    if (!srq) qp->rq.Init(caps->max_recv_wr, caps->max_recv_sge);
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  qp->type = xrc == XrcRole::kNone ? type : QpType::kRc;
  qp->xrc = xrc;
  qp->xrcd = xrcd;
  if (xrc == XrcRole::kRecv) qp->xrc_handles.push_back(handle);
  qp->pd = pd;
  qp->send_cq = send_cq;
  qp->recv_cq = recv_cq;
  qp->srq = srq;
  qp->handle = handle;
  qp->sq_sig_all = sq_sig_all;
  qp->attr.cap = *caps;
  Qp* const made = qp.get();
  SpinLock lock(engine_->mu_);
  if (const int rc = engine_->AddQpLocked(qp, fixed_qpn)) return rc;
  *out = made;
  return 0;
}

uint32_t Device::QpNum(const Qp* qp) const { return qp->qpn; }

QpState Device::GetQpState(const Qp* qp) const {
  SpinLock lock(engine_->mu_);
  return qp->attr.qp_state;
}

int Device::ModifyQp(Qp* qp, const QpAttr& attr, uint32_t mask) {
  SpinLock lock(engine_->mu_);
  return engine_->ModifyQpLocked(qp, attr, mask);
}

int Device::QueryQp(Qp* qp, QpAttr* out) {
  SpinLock lock(engine_->mu_);
  *out = qp->attr;
  out->cur_qp_state = qp->attr.qp_state;
  out->cap = qp->caps;
  out->sq_psn = qp->req.sq_psn;
  return 0;
}

int Device::DestroyQp(Qp* qp, uint32_t* async_events_reported, void* handle) {
  std::unique_ptr<Qp> doomed;  // freed after the lock is released (queues.h)
  SpinLock lock(engine_->mu_);
  return engine_->RemoveQpLocked(qp, async_events_reported, handle, &doomed);
}

int Device::PostSend(Qp* qp, const SendWr& wr) {
  const bool ud = qp->type == QpType::kUd;
  // wr_opcode.h: where each opcode may be posted.
  const WrOpcodeInfo& op = GetWrOpcodeInfo(wr.opcode);
  if (!op.PostableOn(qp->type)) return EINVAL;
  if (qp->xrc == XrcRole::kRecv) return EINVAL;  // no send queue
  if (wr.sges.size() > qp->caps.max_send_sge) return EINVAL;
  uint64_t length = 0;
  for (const Sge& s : wr.sges) length += s.length;
  if (length > engine_->attr().max_msg_sz) return EINVAL;
  const bool is_inline = (wr.send_flags & kInline) && op.inline_ok;
  if (is_inline && length > qp->caps.max_inline_data) return EINVAL;
  if (op.atomic_write) {
    // Its 8 bytes travel in the WR itself (SendWr::compare_add), not in
    // SGEs; XRC has no ATOMIC WRITE opcode here (wire/opcode.h).
    if (!wr.sges.empty() || qp->xrc != XrcRole::kNone) return EINVAL;
    length = 8;
  }
  if (op.one_word()) {
    // IBA 9.4.5: an atomic operates on 8 naturally aligned bytes.
    if (length != 8 || (wr.remote_addr & 7)) return EINVAL;
  }
  if (ud && wr.ah == nullptr) return EINVAL;
  if (op.local && (wr.opcode == WrOpcode::kBindMw) && wr.bind_mw == nullptr) return EINVAL;

  SpinLock lock(engine_->mu_);
  return engine_->PostSendLocked(qp, wr, length, is_inline);
}

int Device::PostRecv(Qp* qp, const RecvWr& wr) {
  // XRC QPs receive through XRC SRQs only.
  if (qp->srq || qp->xrc != XrcRole::kNone) return EINVAL;
  if (wr.sges.size() > qp->caps.max_recv_sge) return EINVAL;
  SpinLock lock(engine_->mu_);
  return engine_->PostRecvLocked(qp, wr);
}

int Device::async_fd(int queue) const {
  SpinLock lock(engine_->mu_);
  return engine_->AsyncQueueFdLocked(queue);
}

int Device::GetAsyncEvent(AsyncEvent* out, int queue) {
  // The queue lives until its context is closed, which ibv_close_device(3)
  // forbids while a call on the context is running: the fd stays valid
  // across the blocking read.
  const int fd = async_fd(queue);
  if (fd < 0) return EINVAL;
  for (;;) {
    if (int err = ReadEventByte(fd)) return err;
    SpinLock lock(engine_->mu_);
    const int rc = engine_->PopAsyncEventLocked(queue, out);
    // EAGAIN: the fd woke us for events whose object was destroyed since
    // (their purge could not take back the byte we had already read): wait
    // again.
    if (rc != EAGAIN) return rc;
  }
}

int Device::OpenAsyncQueue() {
  auto q = std::make_unique<AsyncQueue>();
  if (!q->ok()) return -errno;
  SpinLock lock(engine_->mu_);
  return engine_->AddAsyncQueueLocked(std::move(q));
}

void Device::CloseAsyncQueue(int queue) {
  if (queue == kDeviceAsyncQueue) return;
  std::unique_ptr<AsyncQueue> gone;  // its fds close after the lock is released
  SpinLock lock(engine_->mu_);
  gone = engine_->TakeAsyncQueueLocked(queue);
}

void Device::SetAsyncRouter(AsyncRouter router) {
  SpinLock lock(engine_->mu_);
  engine_->SetAsyncRouterLocked(router);
}

EngineStats Device::stats() const {
  SpinLock lock(engine_->mu_);
  return engine_->StatsLocked();
}

transport::TransportCounters Device::transport_counters() const {
  SpinLock lock(engine_->mu_);
  return engine_->TransportCountersLocked();
}

void Device::ProgressInline() {
  if (!engine_->mu_.try_lock()) return;
  engine_->PollOnceLocked();
  engine_->mu_.unlock();
}

}  // namespace softrnic::engine
