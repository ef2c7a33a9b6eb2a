// What the parts of softrnic's librdmacm share: the id, event and channel
// structures, the process's CM (QP1, tables, lock) and the functions the
// files call on each other. Private to the library. The files:
//   cma.cc, cma_qp.cc   the rdma_* API (ids, channels, connections; QPs and SRQs)
//   cma_address.cc      rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route
//   cma_ep.cc           rdma_create_ep, rdma_destroy_ep, rdma_get_request
//   addrinfo.cc         local addresses, routes, rdma_getaddrinfo
//   cm_state.cc         the CM object, tunables, GID helpers, host registry
//   cm_channel.cc       event channels and event delivery
//   cm_transitions.cc   the CM state machine as a table (cm_transitions.h)
//   cm_protocol.cc      MAD handlers, state changes (Apply), timers
//   cm_qp1.cc           QP1: start-up, MADs in and out, CM thread, exit hook
//   cm_qp_attr.cc       the data QP's attributes and moves
//   cm_multicast.cc     rdma_join_multicast / rdma_leave_multicast
//   mad.cc              every byte of the CM MADs (mad.h)
//
// Locking: one mutex (Cm::mu) guards every id and the CM's tables; each event
// channel has its own mutex for its queue, always taken after Cm::mu.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rdmacm/cm_send_slots.h"
#include "rdmacm/cm_transitions.h"
#include "rdmacm/mad.h"
#include "seal/connection_secret.h"

namespace softrnic::rdmacm {

using Clock = std::chrono::steady_clock;

// Retransmission interval and count of REQ / REP / DREQ / SIDR_REQ
// (SOFTRNIC_CM_TIMEOUT_MS, SOFTRNIC_CM_RETRIES), and SOFTRNIC_CM_DEBUG.
int RetryMs();
int Retries();
// How long a disconnected id stays in TimeWait (SOFTRNIC_CM_TIMEWAIT_MS).
int TimeWaitMs();
bool Debug();
// CLOCK_MONOTONIC in microseconds (the debug lines' time stamps).
long long DebugUs();
// Each line carries the monotonic time in microseconds, so a log of two
// processes (client and server) can be merged into one timeline.
#define CM_DBG(...)                                                      \
  do {                                                                   \
    if (::softrnic::rdmacm::Debug()) {                                   \
      fprintf(stderr, "softrnic-cm: %lld ", ::softrnic::rdmacm::DebugUs()); \
      fprintf(stderr, __VA_ARGS__);                                      \
      fputc('\n', stderr);                                               \
    }                                                                    \
  } while (0)

constexpr int kSendSlots = 256;
// QP1's receive queue. A UD MAD that finds no receive WQE is dropped and
// costs a 500 ms retransmission, and a burst of connects (cmtime -c 1000
// sends 1000 REQs, then 1000 DREQs, at once) arrives while the CM thread
// may wait for Cm::mu (an application thread moving a QP under it): 128
// buffers dropped dozens of REQs, 512 still hundreds of DREQs (the
// kernel's MAD layer, 512 by default, drains them in softirq context).
// The CM thread reposts each buffer as soon as it has copied the MAD out
// (Cm::pending_mads).
constexpr int kRecvSlots = 2048;
// GRH + MAD (296 bytes), rounded up to a cache line.
constexpr int kSlotSize = 320;
constexpr size_t kGrh = 40;
static_assert(kSlotSize >= int(kGrh + kMadSize), "a QP1 buffer holds a GRH and a MAD");
// MADs copied off QP1 and not handled yet: at most this many (a flood
// beyond it is dropped as a full receive queue would drop it).
constexpr size_t kMaxPendingMads = 4096;
constexpr uint64_t kRecvTag = 1ull << 32;
constexpr int kMaxRdAtomic = 16;
// A same-host connect to a port with no registered listener polls the
// registry every kLookupMs for kLookups times (a listener that is just being
// set up, as perftest's server does after its handshake) before REJECTED.
constexpr int kLookupMs = 50;
// How long rdma_destroy_id waits for the id's handed-out events to be
// acknowledged by another thread (cma.cc).
constexpr std::chrono::milliseconds kDestroyAckWait{2000};
constexpr int kLookups = 20;

// ---------------------------------------------------------------- channels / events
struct Id;

struct Event {
  rdma_cm_event ev;  // first
  uint8_t pdata[256];
  // Once rdma_get_cm_event hands it out: the count of its id's events not
  // yet acknowledged (Id::events_out), shared so that a late ack never
  // touches a freed id.
  std::shared_ptr<std::atomic<int>> out;
};

// The channel's fd is an eventfd in semaphore mode holding exactly one count
// per queued event (both change together under `mu`), so it is pollable, a
// blocking rdma_get_cm_event waits in poll() for an event (O_NONBLOCK:
// EAGAIN), an event purged from the queue (its id destroyed) takes its count
// with it, and closing the fd never wakes a thread blocked in
// rdma_get_cm_event with a spurious EOF (rping's CM thread stays blocked
// until exit, as with the kernel's rdma_cm fd).
struct Channel {
  rdma_event_channel ch;  // first
  std::mutex mu;
  std::deque<Event*> q;
  std::atomic<bool> destroyed{false};  // see FreeChannel
};

inline Channel* ToChannel(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }

// kTimeWait: the id left the connection (DREP, DREQ or DREQ timeout) and
// waits out TimeWait (IBA 12.9) before RDMA_CM_EVENT_TIMEWAIT_EXIT.
enum class Timer { kNone, kReq, kRep, kDreq, kSidr, kTimeWait };

// A multicast group the id joined (cm_multicast.cc).
struct McJoin {
  sockaddr_storage addr{};  // as the application named it
  ibv_gid mgid{};
  uint16_t join_flags = 0;
  void* context = nullptr;
  bool attached = false;  // the id's QP is attached to mgid
};

struct Id {
  rdma_cm_id id;  // first
  Channel* chan = nullptr;
  // Events naming this id that rdma_get_cm_event handed out and
  // rdma_ack_cm_event has not taken back: rdma_destroy_id waits for them,
  // as librdmacm does (rdma_destroy_id(3): "ack all related events"), so
  // that a thread still handling one never reads a freed id.
  std::shared_ptr<std::atomic<int>> events_out = std::make_shared<std::atomic<int>>(0);
  bool sync = false;  // created without a channel: calls wait for their event
  St st = St::kIdle;
  bool bound = false;
  // ListenKey(port space, source port) under which the id is in Cm::ports
  // (NotePort), 0 while it is not.
  uint32_t port_key = 0;
  bool local_dst = false;  // destination is on this host (registry lookup)
  bool registered = false;  // listener in the host registry
  // RDMA_OPTION_ID_AFONLY and _REUSEADDR (rdma_set_option(3)): the port
  // rules of the kernel's cma_check_port (cma_address.cc, ClaimPort). An
  // id's afonly is the option's value if set, else decided at bind: 1 for
  // IPv4, net.ipv6.bindv6only for IPv6 (as the kernel's rdma_bind_addr).
  bool afonly = false;
  bool afonly_set = false;
  bool reuseaddr = false;
  int sgid_index = 0;
  ibv_gid dgid{};  // the peer: every MAD of this connection comes from it
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint32_t local_psn = 0;
  // Sealed RC's exchange (cm_seal.cc, docs/sealed.md): our ephemeral key
  // (the active side's from its REQ on; the passive side's from its REP),
  // and the peer's public key when its REQ offered one.
  std::unique_ptr<softrnic::seal::EphemeralX25519> seal_key;
  std::array<uint8_t, softrnic::seal::kX25519Bytes> seal_peer{};
  bool seal_offered = false;
  uint32_t remote_qpn = 0, remote_psn = 0;
  // Connection parameters as this side applies them to its QP.
  uint8_t resp_res = 1, init_depth = 1, retry_cnt = 7, rnr_retry = 7;
  // The connection's path MTU (enum ibv_mtu): on the active side the port's
  // active MTU when the route is resolved, as the kernel's rdma_cm takes its
  // netdev's; carried in the REQ ("Path Packet Payload MTU", IBA 12.6.5),
  // whose value the passive side adopts so that both ends agree (a responder
  // checks every packet's length against its QP's path MTU, IBA 9.7.5.1.2
  // C9-98..C9-100).
  uint8_t path_mtu = IBV_MTU_1024;
  uint32_t remote_qkey = 0;
  // rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT / _TOS): the QP's Local ACK
  // Timeout (RTS) and the traffic class of its path (RTR).
  uint8_t ack_timeout = 14;
  uint8_t tos = 0;
  // Retransmission. `timer` and `deadline` change only through SetTimer /
  // StopTimer, which keep Cm::timers in step.
  Timer timer = Timer::kNone;
  int retries_left = 0;
  Clock::time_point deadline;
  uint8_t last_mad[kMadSize];
  bool have_last = false;
  // Same-host destination whose listener is not registered (yet): the REQ
  // waits in last_mad while the registry is polled (lookups_left times).
  bool pending_lookup = false;
  int lookups_left = 0;
  // REJ "invalid service ID" answers are retried this many more times
  // (every kLookupMs) before REJECTED: see HandleRej.
  int invalid_sid_retries = 0;
  // Library-created CQs / channels (rdma_create_qp without CQs).
  bool own_send_cq = false, own_recv_cq = false;
  // rdma_create_ep on a passive id: QP attributes for rdma_get_request.
  bool has_ep_attr = false;
  ibv_qp_init_attr ep_attr{};
  ibv_pd* ep_pd = nullptr;
  // Listener: rdma_listen's backlog, and how many of its connect requests
  // the application has not taken yet (their CONNECT_REQUEST is queued).
  int backlog = 0;
  int unclaimed_requests = 0;
  // Passive id made by a REQ whose CONNECT_REQUEST the application has not
  // taken yet: its listener (whose backlog it holds), the channel its event
  // waits in, and when it came (unclaimed ones are reclaimed after a while).
  // (In Cm::unclaimed while unclaimed_of is set.)
  Id* unclaimed_of = nullptr;
  Channel* request_chan = nullptr;
  Clock::time_point requested_at;
  // Multicast groups joined (rdma_join_multicast), until left.
  std::vector<McJoin> multicast;
  // The exit hook disconnected it (DisconnectAllAtExit; not one the
  // application's rdma_disconnect had): its events are not delivered from
  // then on (Deliver).
  bool exit_dreq = false;
};

inline Id* ToId(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }

// Key of a passive id by its peer: (peer GID, IPv4-mapped or IPv6, the
// peer's comm ID).
using PeerKeyT = std::pair<std::array<uint8_t, 16>, uint32_t>;
inline PeerKeyT PeerKey(const ibv_gid& peer, uint32_t remote_comm_id) {
  PeerKeyT k{{}, remote_comm_id};
  std::memcpy(k.first.data(), peer.raw, 16);
  return k;
}
// Key of a listener: (port space, port).
inline uint32_t ListenKey(int ps, uint16_t port) { return uint32_t(ps) << 16 | port; }

// ---------------------------------------------------------------- the CM
struct Cm {
  std::mutex mu;
  bool started = false;
  bool exited = false;  // the exit hook has run
  int init_error = 0;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* cc = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* bufs = nullptr;
  SendSlots send_slots{kSendSlots};  // QP1 SENDs in flight (SendRaw; the exit hook waits)
  std::thread th;
  std::vector<uint32_t> gid_ip;  // host-order IPv4 per GID index (0: none)
  std::vector<ibv_gid> gid6;     // IPv6 GID per GID index (zero: none or IPv4)
  int loop_idx = -1;
  // The device's host NIC lane (docs/host-nic.md), the top byte of every
  // comm ID drawn here so that MADs to the host's shared addresses are
  // steered to this process; -1: none.
  int lane = -1;
  std::map<std::pair<int, std::string>, ibv_ah*> ahs;
  std::unordered_map<uint32_t, Id*> by_comm;         // our comm ID -> id
  std::map<PeerKeyT, Id*> by_peer;                   // PeerKey -> passive id
  // ListenKey -> the listeners of that port: one per family, or several
  // bound to distinct addresses (FindListener picks by the REQ's address).
  std::unordered_map<uint32_t, std::vector<Id*>> listeners;
  std::set<Id*> ids;
  // Bound ids by ListenKey(port space, source port) (NotePort / ForgetId):
  // a bind looks at the ids on its port only. A set per port: a listener's
  // passive ids all share its port, and one leaves in O(1).
  std::unordered_map<uint32_t, std::unordered_set<Id*>> ports;
  // Ids whose timer runs, by deadline (an id is here, under its
  // Id::deadline, exactly while Id::timer is not kNone), and passive ids
  // whose CONNECT_REQUEST nobody took, by arrival: the CM thread finds what
  // is due, and how long it may sleep, without walking every id.
  std::set<std::pair<Clock::time_point, Id*>> timers;
  std::set<std::pair<Clock::time_point, Id*>> unclaimed;
  // MADs taken off QP1's receive queue (its buffers reposted at once), in
  // arrival order, for the CM thread to handle (cm_qp1.cc).
  struct PendingMad {
    uint32_t len;
    uint8_t buf[kGrh + kMadSize];
  };
  std::deque<PendingMad> pending_mads;
  uint64_t pending_mad_drops = 0;
  // MADs to send while every QP1 send buffer is still queued (a burst of
  // 1000 DREQs), in order; posted as send completions free buffers.
  struct BackloggedMad {
    int sgid_index;
    ibv_gid dgid;
    uint8_t mad[kMadSize];
  };
  std::deque<BackloggedMad> send_backlog;
  // DREQs of ids destroyed before the peer's DREP came (cm_linger.cc): sent
  // again until it comes, as the kernel's CM keeps a destroyed id's DREQ
  // going in TimeWait; at most kMaxLingering, the oldest dropped first.
  struct LingeringDreq {
    int sgid_index;
    ibv_gid dgid;
    uint32_t local_comm_id, remote_comm_id, remote_qpn;
    int retries_left;
    Clock::time_point next;
  };
  std::deque<LingeringDreq> lingering;
  std::map<ibv_context*, ibv_pd*> default_pd;
  std::string netns;
  // MADs dropped because they did not match a connection (wrong peer address
  // or comm ID: forged or stale), REQs dropped for a full backlog, requests
  // reclaimed unclaimed, replies to unknown peers suppressed by the limit.
  uint64_t ignored_mads = 0, backlog_drops = 0, reclaimed_requests = 0, replies_suppressed = 0;
  // MADs and timeouts of a known id that its state has no transition for
  // (cm_transitions.h): dropped.
  uint64_t unexpected_events = 0;
  // Replies to MADs of no connection (REJ, DREP, SIDR_REP): a token bucket.
  double reply_tokens = 0;
  Clock::time_point reply_refill{};
  // Where MADs go (QP1's sender, set at start-up; a unit test's capture)
  // and the clock of every CM deadline (a unit test's fake clock).
  int (*send_mad)(int sgid_index, const ibv_gid& dgid, const uint8_t* mad) = nullptr;
  Clock::time_point (*now)() = &Clock::now;
};

Cm& G();

// ---------------------------------------------------------------- shared state (cm_state.cc)
// The clock every CM deadline is read from (Cm::now: a unit test's fake).
inline Clock::time_point Now() { return G().now(); }
// A forked child's fresh CM (pthread_atfork).
void AtForkChild();
// A unit test's fresh CM; the previous one (no ids left, not started) is
// freed.
void ResetCmForTest();
void SetGidFromIp(ibv_gid* g, uint32_t ip_host);
uint32_t IpFromGid(const uint8_t* raw);
std::string IpStr(uint32_t ip_host);
int GidIndexForIp(uint32_t ip);
// IPv6 (issue 15). A GID is IPv4 when IPv4-mapped (::ffff:a.b.c.d).
bool GidIsIpv4(const ibv_gid& g);
// The GID index of a local GID of either family, or -1.
int GidIndexForGid(const ibv_gid& gid);
// The device's GID at `index` (from gid_ip or gid6); zero if none.
ibv_gid LocalGid(int index);
// Text of a GID: "10.0.0.1" for an IPv4-mapped one, else IPv6 text.
std::string GidStr(const ibv_gid& g);
// The GID of an IPv4 or IPv6 socket address (false: another family).
bool GidFromSockaddr(const sockaddr* a, ibv_gid* out);
// Port of a sockaddr_in or sockaddr_in6 (host order).
uint16_t SockPort(const sockaddr* a);
uint16_t SinPort(const sockaddr_in& s);
// The host registry of same-host listeners (host_registry.h), G().mu held.
bool RegRead(int ps, uint16_t port, long* pid, uint32_t* ip);
int RegAdd(int ps, uint16_t port);
void RegRemove(int ps, uint16_t port);
ibv_pd* DefaultPd(ibv_context* ctx);
void AttachDevice(Id* id);
Id* NewIdLocked(Channel* c, void* ctx, rdma_port_space ps, ibv_qp_type qpt);
uint8_t ClampRd(uint8_t v);
// The active MTU of port 1 of `ctx` (enum ibv_mtu); IBV_MTU_1024 if it
// cannot be queried.
uint8_t PortActiveMtu(ibv_context* ctx);

// ---------------------------------------------------------------- addresses (addrinfo.cc)
bool IsLocalIp(uint32_t ip);
// The same for an IPv6 address (::1, a GID of the device, an interface's).
bool IsLocalIp6(const in6_addr& a);
// The IPv6 source address the kernel would use to reach `dst` (scope: the
// link-local destination's interface).
int RouteSource6(const in6_addr& dst, uint32_t scope_id, in6_addr* src);
// The source address the kernel would use to reach `dst` (errno-style error
// if there is no route).
int RouteSource(uint32_t dst, uint32_t* src);

// ---------------------------------------------------------------- the data QP (cm_qp_attr.cc)
void QpToErr(Id* id);
int InitQpAttr(Id* id, ibv_qp_attr* a, int* mask);
int ModifyTo(Id* id, ibv_qp_state s);
// Sealed RC's key exchange in the CM's private data (cm_seal.cc,
// docs/sealed.md "The exchange"). Active side: SealOffer adds the offer to
// a REQ's private data (room permitting, on a sealing device) and
// SealTakeAnswer keys the QP from the REP before RTR. Passive side:
// SealNoteOffer remembers a REQ's offer; SealAnswer keys the QP and adds
// the answer to the REP. Each returns 0 or why the connection must be
// refused (require: EACCES for a peer without the exchange, EMSGSIZE for
// private data that leaves no room for the offer); the refusing side sends
// a REJ carrying kSealRefusal. SealHideBlock zeroes the block in the
// private data an application is handed.
inline constexpr char kSealRefusal[] = "softrnic: sealed RC required (SOFTRNIC_SEAL=require)";
int SealOffer(Id* id, CmMsg* req, size_t user_len);
int SealTakeAnswer(Id* id, const CmMsg& rep);
void SealNoteOffer(Id* id, const CmMsg& req);
int SealAnswer(Id* id, CmMsg* rep, size_t user_len);
void SealHideBlock(uint8_t* pdata, size_t field_len);
int QpToRts(Id* id);

// ---------------------------------------------------------------- QP1 and the CM thread (cm_qp1.cc)
// Starts the process's CM once (device, QP1, CM thread); 0 or an errno.
int Start();

// ---------------------------------------------------------------- multicast (cm_multicast.cc)
// Detaches `qp` from every group the id joined (rdma_destroy_qp). G().mu held.
void DetachAllMulticast(Id* id, ibv_qp* qp);
// ---------------------------------------------------------------- API helpers (cma.cc)
// errno = err, returns -1.
int Fail(int err);
// A synchronous id (no channel) waits for the event of its operation
// (librdmacm's ucma_complete); 0 or -1 with errno.
int Complete(Id* id);
// rdma_create_id with the QP type given (rdma_create_ep takes it from the
// rdma_getaddrinfo answer); no channel: a synchronous id.
int CreateId(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps,
             ibv_qp_type qpt);
// ---------------------------------------------------------------- addresses of an id (cma_address.cc)
// rdma_bind_addr under G().mu (also rdma_listen's implicit bind); 0 or an errno.
int BindLocked(Id* id, const sockaddr* addr);
// The kernel's cma_any_addr: the family's wildcard or a loopback address.
bool AnyAddr(const sockaddr* a);
// The same family and address (ports aside).
bool SameAddr(const sockaddr* a, const sockaddr* b);
// rdma_listen of a bound id: its port checked again as if REUSEADDR were
// off on its side (the kernel's rdma_listen: a listener is not reusable).
int CheckListenPort(const Id* id);

// ---------------------------------------------------------------- events (cm_channel.cc)
Event* NewEvent(Id* id, rdma_cm_event_type t, int status);
void Push(Channel* c, Event* e);
void Deliver(Id* id, Event* e);
void Simple(Id* id, rdma_cm_event_type t, int status);
void SetConnPdata(Event* e, const uint8_t* p, size_t n);
Channel* NewChannel();
void FreeChannel(Channel* c);
// Removes the queued, unread events of `id` from `c`, as the kernel's ucma
// does when an id is destroyed: no event may name a freed id. (A listener's
// unclaimed CONNECT_REQUESTs name their own ids: ReleaseListener.)
void PurgeEvents(Channel* c, const Id* id);
// rdma_get_cm_event's dequeue: the next event (blocking unless the fd is
// O_NONBLOCK), with the listener backlog released for a CONNECT_REQUEST.
int PopEvent(Channel* c, rdma_cm_event** out);

// ---------------------------------------------------------------- protocol (cm_protocol.cc)
// Sends a MAD through the CM's MAD port (Cm::send_mad).
int SendRaw(int sgid_index, const ibv_gid& dgid, const uint8_t* mad);
int SendMsg(int sgid_index, const ibv_gid& dgid, const CmMsg& m, Id* remember = nullptr);
// Timer `t` of the id, due at `deadline` (Cm::timers follows).
void SetTimer(Id* id, Timer t, Clock::time_point deadline);
// SetTimer(t, now + the retransmission interval), with the full retry count.
void ArmTimer(Id* id, Timer t);
void StopTimer(Id* id);
// When the CM thread must next run RunTimers or ReclaimUnclaimedRequests
// (Clock::time_point::max(): nothing pending).
Clock::time_point NextCmDeadline();
uint32_t NewCommId(Id* id);
uint32_t NewPsn();
void SendRtu(Id* id);
// A DREQ for the id's connection; `remember`: kept for retransmission.
void SendDreq(Id* id, bool remember);
void SendDreqTo(int sgid_index, const ibv_gid& dgid, uint32_t local_comm_id, uint32_t remote_comm_id,
                uint32_t remote_qpn);
// rdma_connect's REQ / SIDR_REQ: sent now with timer `t`, or (`defer`: a
// same-host listener not registered yet) kept while the registry is polled.
void SendOrDefer(Id* id, const CmMsg& m, Timer t, bool defer);
// The state machine (cm_transitions.h). Expect: the row for `ev` in the
// id's state, or nullptr, counted (Cm::unexpected_events) and logged, when
// there is none. Apply: the one path of every state change: stops the
// timer if the row says so, sets the next state, delivers the row's event
// (`e` when the caller built it with data, else one with the row's status
// or `status`). RunCmAction: the row's protocol action (the rdma_* calls do
// their own); returns the row to apply (kTakeRep turns into kRepQpFailed's
// when the QP refuses the REP).
const CmTransition* Expect(Id* id, CmEvent ev);
void Apply(Id* id, const CmTransition& t, Event* e = nullptr);
void Apply(Id* id, const CmTransition& t, int status);
const CmTransition* RunCmAction(Id* id, const CmTransition& t, const CmMsg& m);
// A MAD QP1 received: GRH (40 bytes) + MAD.
void HandleMad(const uint8_t* buf, size_t len);
// Retransmissions and timeouts that are due (the CM thread, every pass).
void RunTimers();
// Lingering DREQs (cm_linger.cc). LingerDreq: `id`, being destroyed with
// its DREQ unanswered, leaves it to the CM. ResendLingeringDreqs: those due
// by `now` go again (all of them when `all`); dropped when their retries
// are spent. TakeLingeringDrep: a DREP for one of them (by our comm ID,
// theirs and the peer's GID) ends it; false if it is none of them.
constexpr size_t kMaxLingering = 4096;
void LingerDreq(const Id* id);
void ResendLingeringDreqs(Clock::time_point now, bool all);
bool TakeLingeringDrep(uint32_t ours, uint32_t theirs, const ibv_gid& peer);
// Listener bookkeeping: rdma_listen / rdma_destroy_id.
void AddListener(Id* l, int backlog);
// Whether another listener of this process holds l's port space and port
// in the host registry (the first claims it there, the last releases it).
bool OtherRegisteredListener(const Id* l);
void ReleaseListener(Id* l);
// Forgets an id in the CM's lookup tables (rdma_destroy_id).
void ForgetId(Id* id);
// Indexes the bound id under its port (Cm::ports), once its source port is
// set; again after a change.
void NotePort(Id* id);
// Destroys passive ids whose CONNECT_REQUEST nobody took within the
// reclaim time (the CM thread, every pass).
void ReclaimUnclaimedRequests();
// The application took the CONNECT_REQUEST of passive id `c` (PopEvent):
// it no longer holds a slot of its listener's backlog.
void ClaimRequest(Id* c);

}  // namespace softrnic::rdmacm
