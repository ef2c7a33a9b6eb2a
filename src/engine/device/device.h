// softrnic's engine facade: one software RNIC per process.
//
// Every resource the verbs API knows (PD, MR, CQ, completion channel, SRQ,
// AH, QP) is created and driven through Device. Objects are opaque to
// callers; each carries the caller's `handle` (the verbs shim passes its own
// ibv_* struct) so that events can name them.
//
// Errors: functions return 0 or a positive errno value as the verbs man pages
// name them (EINVAL, ENOMEM, EBUSY, ...). PollCq returns a count or -errno.
//
// Thread-safety: every method is safe to call from any thread. Internally
// one mutex guards the engine state; the progress thread and application
// threads that poll take it in turn (see docs/progress.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <span>
#include <string>

#include "engine/queues/async_queue.h"
#include "engine/device_identity.h"
#include "engine/memory/memory_window.h"
#include "engine/queues/multicast.h"
#include "engine/observe/stats.h"
#include "engine/types.h"
#include "transport/shm_path.h"
#include "transport/transport.h"

namespace softrnic::engine {

class Pd;
class Mr;
class Cq;
class CompletionChannel;
class Srq;
class Xrcd;
class Ah;
class Qp;
class Engine;
struct EngineConfig;

// What the device reports about itself (ibv_device_attr + port attributes).
// Every limit here is one the engine enforces.
struct DeviceAttr {
  std::string fw_ver = "0.1.0";
  uint64_t node_guid = 0;  // network order
  uint64_t sys_image_guid = 0;
  uint64_t max_mr_size = 1ull << 40;
  uint64_t page_size_cap = 4096;
  uint32_t vendor_id = kVendorId;
  uint32_t vendor_part_id = 0x5ef7;  // softrnic's own id: not a ConnectX/EFA id
  uint32_t hw_ver = 1;
  // Nothing scales with the QP count but the QP table (an idle QP is on no
  // per-pass list: engine.h, timer list); 2^17 of the 24-bit QPN space
  // leaves random QPNs (Engine::FreshQpnLocked) few collisions to retry.
  uint32_t max_qp = 1u << 17;
  uint32_t max_qp_wr = 16384;
  uint32_t max_sge = 32;
  uint32_t max_sge_rd = 32;
  uint32_t max_cq = 4096;
  uint32_t max_cqe = 1 << 20;
  uint32_t max_mr = 1 << 16;
  // Memory windows: their indices share the R_Key space with regions.
  uint32_t max_mw = 1 << 16;
  uint32_t max_pd = 4096;
  uint32_t max_qp_rd_atom = 16;
  uint32_t max_qp_init_rd_atom = 16;
  uint32_t max_res_rd_atom = 16 * 4096;
  uint32_t max_srq = 1024;
  uint32_t max_srq_wr = 16384;
  uint32_t max_srq_sge = 32;
  uint32_t max_ah = 1 << 16;
  uint32_t max_inline_data = 256;
  // UD multicast (multicast.h): groups this device may join at once (the
  // transport's max_multicast_groups(), set by the Engine: 0 without a
  // transport), QPs per group, attachments.
  uint32_t max_mcast_grp = 0;
  uint32_t max_mcast_qp_attach = MulticastGroups::kMaxQpsPerGroup;
  uint32_t max_total_mcast_qp_attach = MulticastGroups::kMaxAttachments;
  uint32_t max_msg_sz = 1u << 31;
  uint32_t max_pkeys = 1;
  uint8_t local_ca_ack_delay = 15;
  uint8_t phys_port_cnt = 1;
  // Port
  Mtu max_mtu = Mtu::k4096;
  Mtu active_mtu = Mtu::k1024;
  uint32_t gid_tbl_len = 16;
};

// The file an XRC domain is opened by (ibv_xrcd_init_attr.fd): its inode.
struct XrcdInode {
  uint64_t dev = 0;
  uint64_t ino = 0;
};

struct SrqAttr {
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
};

class Device {
 public:
  // The process's device, created on first use (transport, progress thread).
  // A forked child gets a fresh device of its own on its first call.
  // Returns null and sets *error if no transport could be opened.
  static std::shared_ptr<Device> Get(std::string* error);

  // A device of its own with an explicit configuration (engine_config.h),
  // for tests, fuzzers and tools that want several devices in one process
  // or settings other than the environment's.
  static std::shared_ptr<Device> Create(const EngineConfig& config, std::string* error);
  // The same with the environment's settings (EngineConfig::FromProcess)
  // but this UDP configuration.
  static std::shared_ptr<Device> Create(const transport::UdpConfig& udp, std::string* error);
  // The same over a transport the caller built (the two above build theirs
  // with transport::CreateTransport from config.udp and
  // config.transport_mode): tests give a device a transport with other
  // capabilities. config.udp.port must be the transport's port.
  static std::shared_ptr<Device> Create(std::unique_ptr<transport::Transport> transport,
                                        const EngineConfig& config);

  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const;
  const DeviceAttr& attr() const;
  // GID table: one IPv4-mapped GID per local UDP endpoint (docs/addressing.md).
  std::span<const Gid> gids() const;

  int AllocPd(void* handle, Pd** out);
  int DeallocPd(Pd* pd);  // EBUSY while MRs, QPs, SRQs or AHs use it
  // ibv_import_pd / ibv_import_mr (device_import.cc): a PD by its id (the
  // handle ibv_pd carries), a region of `pd` by its lkey (ibv_mr's handle).
  Pd* FindPd(uint32_t id) const;
  uint32_t PdId(const Pd* pd) const;
  Mr* FindMr(const Pd* pd, uint32_t lkey) const;
  // The address and length it was registered with.
  void MrRange(const Mr* mr, void** addr, size_t* length) const;

  // Registers [addr, addr+length) with I/O virtual address `iova` (addr for
  // ibv_reg_mr). access: Access bits. EINVAL for REMOTE_WRITE or
  // REMOTE_ATOMIC without LOCAL_WRITE (IBA 10.6.3.1).
  int RegMr(Pd* pd, void* addr, size_t length, uint64_t iova, uint32_t access, void* handle,
            Mr** out);
  // ibv_advise_mr: brings the pages of each SGE's range (an ODP region's,
  // lkey of `pd`) in, readable or writable. 0, or EFAULT (bad lkey, range
  // outside the region or not mappable), EINVAL (not an ODP region), EPERM
  // (PREFETCH_WRITE on a region without local write).
  int AdviseMr(const Pd* pd, MrAdvice advice, const Sge* sges, uint32_t num_sge);
  // ibv_rereg_mr: changes what `what` (Rereg bits) names, each part as
  // RegMr takes it: the translation (addr, length; the iova becomes addr),
  // the PD, the access (a change of kZeroBased alone makes the iova 0 or
  // addr). The keys stay (ibv_rereg_mr(3) lets them; peers holding the rkey
  // reach the new range). All or nothing: on error (RegMr's errno for the
  // new attributes) the region is exactly as it was.
  int ReregMr(Mr* mr, uint32_t what, Pd* pd, void* addr, size_t length, uint32_t access);
  int DeregMr(Mr* mr);
  // ibv_alloc_mw / ibv_dealloc_mw (memory_window.h). Dealloc invalidates a
  // bound window; EBUSY while a BIND_MW naming it waits in a send queue.
  int AllocMw(Pd* pd, MwType type, void* handle, Mw** out);
  int DeallocMw(Mw* mw);
  uint32_t MwRkey(const Mw* mw) const;
  uint32_t MrLkey(const Mr* mr) const;
  uint32_t MrRkey(const Mr* mr) const;

  int CreateCompletionChannel(CompletionChannel** out);
  int DestroyCompletionChannel(CompletionChannel* channel);  // EBUSY while CQs use it
  int CompletionChannelFd(const CompletionChannel* channel) const;
  // ibv_get_cq_event: waits (unless the fd is O_NONBLOCK: EAGAIN) for a CQ
  // event and returns the CQ's handle.
  int GetCqEvent(CompletionChannel* channel, void** cq_handle);

  // Queue memory (CreateCq, CreateSrq, CreateQp): where the object keeps
  // its entries (the completion ring; the receive WQEs; the send and
  // receive WQEs), null for the engine's own. The verbs layer passes a
  // parent domain's allocators here (ibv_alloc_parent_domain(3)). The
  // resource is called before the engine lock is taken and after it is
  // released, never under it (it may be application code); it must
  // outlive the object. An allocation it fails (std::bad_alloc) fails the
  // call with ENOMEM, with every block it gave before handed back.
  //
  // cqe: at least this many entries (EINVAL if 0 or > max_cqe).
  int CreateCq(uint32_t cqe, CompletionChannel* channel, void* handle, Cq** out,
               std::pmr::memory_resource* queue_memory = nullptr);
  uint32_t CqCapacity(const Cq* cq) const;
  // The new ring comes from the CQ's queue memory (ENOMEM if it cannot).
  int ResizeCq(Cq* cq, uint32_t cqe);
  // EBUSY while QPs or SRQs use it. async_events_reported: see DestroyQp.
  int DestroyCq(Cq* cq, uint32_t* async_events_reported = nullptr);
  // Returns the number of completions written (0..n) or -errno.
  int PollCq(Cq* cq, int n, Completion* out);
  int ArmCq(Cq* cq, bool solicited_only);
  void AckCqEvents(Cq* cq, unsigned n);

  int CreateSrq(Pd* pd, const SrqAttr& attr, void* handle, Srq** out,
                std::pmr::memory_resource* queue_memory = nullptr);
  // mask: 1 = max_wr (resize), 2 = srq_limit (IBV_SRQ_MAX_WR, IBV_SRQ_LIMIT).
  // A resize takes the new queue from the SRQ's queue memory (ENOMEM if it
  // cannot).
  int ModifySrq(Srq* srq, const SrqAttr& attr, uint32_t mask);
  int QuerySrq(Srq* srq, SrqAttr* out);
  // EBUSY while QPs use it. async_events_reported: see DestroyQp.
  int DestroySrq(Srq* srq, uint32_t* async_events_reported = nullptr);
  int PostSrqRecv(Srq* srq, const RecvWr& wr);

  // XRC (xrc.cc). ibv_open_xrcd(3): a domain for `inode` (null: an
  // anonymous one, fd -1); opening the same inode again gives the same
  // domain; no domain for it yet without `create` (O_CREAT) is EAGAIN, one
  // with `exclusive` (O_EXCL) is EINVAL. Domains are per process: the
  // same inode opened by two processes gives each its own.
  int OpenXrcd(const XrcdInode* inode, bool create, bool exclusive, Xrcd** out);
  // Each open is closed once; EBUSY for the last while SRQs or QPs use it.
  int CloseXrcd(Xrcd* xrcd);
  // ibv_create_srq_ex with IBV_SRQT_XRC: its receive completions go to cq;
  // XRC requests name it by SrqNum (24 bits, random). DestroySrq ends it.
  int CreateXrcSrq(Pd* pd, Xrcd* xrcd, Cq* cq, const SrqAttr& attr, void* handle, Srq** out);
  uint32_t SrqNum(const Srq* srq) const;
  // IBV_QPT_XRC_RECV: no send or receive queue, no PD or CQ (the XRC SRQ a
  // request names provides them). DestroyQp ends it once every handle
  // (this one and each OpenXrcRecvQp) is destroyed.
  int CreateXrcRecvQp(Xrcd* xrcd, void* handle, Qp** out);
  // ibv_open_qp(3): another handle to an XRC receive QP of this domain;
  // EINVAL for any other QP number.
  int OpenXrcRecvQp(Xrcd* xrcd, uint32_t qpn, void* handle, Qp** out);

  // UD multicast (multicast.cc; ibv_attach_mcast(3)): EINVAL for a QP that
  // is not UD or a GID that is not multicast (Gid::IsMulticast), ENOMEM
  // past the limits in DeviceAttr, or the transport's errno; attaching
  // twice is a no-op. Detaching a QP that is not attached is EINVAL.
  int AttachMulticast(Qp* qp, const Gid& gid);
  int DetachMulticast(Qp* qp, const Gid& gid);
  // IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: the QP does not receive the
  // multicast datagrams it sent itself.
  void BlockSelfMulticastLoopback(Qp* qp);

  int CreateAh(Pd* pd, const AddressVector& av, void* handle, Ah** out);
  int DestroyAh(Ah* ah);

  // caps is rounded up to what the QP really has (as ibv_create_qp does).
  // kXrcSend: recv_cq and srq are not used (may be null).
  int CreateQp(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, QpCaps* caps,
               bool sq_sig_all, void* handle, Qp** out,
               std::pmr::memory_resource* queue_memory = nullptr);
  // The General Services QP (QPN 1, IBA 3.9.1 / 13.5): a UD QP that carries
  // connection-management MADs (librdmacm). One per device; EBUSY if taken.
  int CreateGsiQp(Pd* pd, Cq* send_cq, Cq* recv_cq, QpCaps* caps, void* handle, Qp** out);
  uint32_t QpNum(const Qp* qp) const;
  QpState GetQpState(const Qp* qp) const;
  // IBA 10.3 / man ibv_modify_qp: EINVAL for a mask that is wrong for the
  // transition or an attribute out of range.
  int ModifyQp(Qp* qp, const QpAttr& attr, uint32_t mask);
  int QueryQp(Qp* qp, QpAttr* out);
  // Unread async events naming the QP are dropped with it (M6). If given,
  // async_events_reported receives how many of its events GetAsyncEvent
  // handed out: the caller waits until the application has acknowledged that
  // many before freeing the handle (ibv_get_async_event(3)).
  // handle: the handle being destroyed (an XRC receive QP may have
  // several); null: the QP's own. EBUSY while it is attached to multicast
  // groups (as the kernel's uverbs answers).
  int DestroyQp(Qp* qp, uint32_t* async_events_reported = nullptr, void* handle = nullptr);
  // EINVAL for a WR the QP cannot take (bad opcode for its type, too many
  // SGEs, inline too long); ENOMEM when the send queue is full; EINVAL when
  // the QP state does not allow posting (RESET, INIT, RTR).
  int PostSend(Qp* qp, const SendWr& wr);
  int PostRecv(Qp* qp, const RecvWr& wr);

  // Async events (ibv_get_async_event; async_queue.h). Queue 0 is the
  // device's own, opened with it; a verbs context opens one of its own.
  // The router names the queue an event goes to (0 when none is set, or
  // when it names no open queue).
  static constexpr int kDeviceAsyncQueue = 0;
  int async_fd(int queue = kDeviceAsyncQueue) const;
  // Blocks (unless the application made the fd non-blocking: EAGAIN) until
  // an event is queued; never returns an event of a destroyed object.
  int GetAsyncEvent(AsyncEvent* out, int queue = kDeviceAsyncQueue);
  // Returns the new queue's id (> 0), or -errno.
  int OpenAsyncQueue();
  void CloseAsyncQueue(int queue);
  using AsyncRouter = int (*)(const AsyncEvent& event);
  void SetAsyncRouter(AsyncRouter router);

  // Runs one pass of the engine on the caller's thread (receive, timers,
  // transmit) if no other thread is running one. Poll paths call this so a
  // polling application pays no thread hop.
  void ProgressInline();

  // Why packets of this device to `dst` (at this device's UDP port) go
  // through shared memory or not: the transport's own decision
  // (transport/shm_path.h), made without taking a ring or keeping the peer
  // mapped. nullopt when the transport has no shared-memory path at all
  // (SOFTRNIC_TRANSPORT=udp, SOFTRNIC_FAULTS, or its segment could not be
  // created). For `softrnic devinfo --peer`, not the data path.
  std::optional<transport::ShmPathVerdict> ExplainPath(const Gid& dst);
  // Whether RC WRITE, READ and atomics to a same-host peer are executed on
  // its memory directly (a shared-memory transport and SOFTRNIC_SHM_DIRECT).
  bool direct_operations() const;
  // Whether the transport has a shared-memory path at all.
  bool shared_memory() const;
  uint16_t udp_port() const;
  // The host NIC (docs/host-nic.md): the lane of this device's QPNs, which
  // rdma_cm also puts in the top byte of its comm IDs, or -1 without one;
  // and the claim of an rdma_cm service (Transport::ClaimCmService).
  int host_nic_lane() const;
  int ClaimCmService(uint16_t port_space, uint16_t port, bool claim);
  // Sealed RC (docs/sealed.md): the device's mode (0 off, 1 prefer, 2
  // require), and rdma_cm's key exchange for a QP before RTR
  // (Engine::SealQpByCmLocked).
  int seal_mode() const;
  int SealQpByCm(Qp* qp, std::span<const uint8_t> exchanged, std::span<const uint8_t> transcript);

  // A consistent snapshot of the engine's and the transport's counters.
  EngineStats stats() const;
  transport::TransportCounters transport_counters() const;

  // Internal: the implementation object.
  Engine& engine() { return *engine_; }

 private:
  explicit Device(std::unique_ptr<Engine> engine);
  int CreateQpWithQpn(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, QpCaps* caps,
                      bool sq_sig_all, void* handle, uint32_t fixed_qpn, Qp** out,
                      Xrcd* xrcd = nullptr, std::pmr::memory_resource* queue_memory = nullptr);
  std::unique_ptr<Engine> engine_;
};

}  // namespace softrnic::engine
