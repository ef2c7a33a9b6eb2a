#include "engine/engine.h"

#include "engine/device_identity.h"
#include "engine/port_mtu.h"
#include "log/log.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace softrnic::engine {
namespace {

// The source check's second half (issue 14, M1). A same-host peer (127/8 or
// an address of this host: Qp::peer_on_host) can be impersonated by any
// local user, who only has to bind the peer's address on another UDP port;
// the peer's device itself always sends from the device port (udp_port_,
// the port every softrnic device listens on and sends to). So for such a
// peer the source port must be that port. Off-host sources cannot be
// checked this way: RoCE v2 leaves the UDP source port to the sender as
// flow entropy for ECMP (IBA Annex A17, RoCE v2), and NICs choose it per QP
// or per flow. (A packet from the wire cannot carry one of this host's
// addresses as its source either: Linux drops it as martian unless
// accept_local is set, so the local case is the one that needs the port.)
bool FromPeerPort(const Qp& qp, const transport::RxPacket& rx, uint16_t device_port) {
  return !qp.peer_on_host || rx.src.port == device_port;
}

}  // namespace

Engine::Engine(std::unique_ptr<transport::Transport> transport, DeviceAttr attr,
               const EngineConfig& config)
    : config_(config),
      attr_(std::move(attr)),
      transport_(std::move(transport)),
      progress_(*this, *transport_,
                ProgressSettings{std::chrono::microseconds(config.spin_us),
                                 std::chrono::microseconds(config.adaptive_spin_us),
                                 config.progress_realtime, config.placement_away}),
      peer_memory_(transport_->peer_memory()),
      udp_port_(config.udp.port) {
  if (peer_memory_ != nullptr && config.shm_direct)
    shm_direct_ = std::make_unique<ShmDirect>(&peer_memory_->own_segment());
  for (const auto& ep : transport_->locals()) gids_.push_back(ep.gid);
  attr_.gid_tbl_len = static_cast<uint32_t>(gids_.size());
  // UD multicast: as many groups as the transport joins (multicast.cc
  // enforces it); a transport that joins none makes a device without
  // multicast, which reports 0 for every multicast limit.
  attr_.max_mcast_grp = transport_->max_multicast_groups();
  if (attr_.max_mcast_grp == 0) attr_.max_mcast_qp_attach = attr_.max_total_mcast_qp_attach = 0;
  // The port's active MTU, what applications (perftest, rdma_cm) take as
  // the path MTU: SOFTRNIC_MTU, else the largest whose packets fit every
  // link the device may send on (Transport::link_mtu: the same for every
  // process of the namespace; port_mtu.h; 1500-byte Ethernet: 1024, since
  // softrnic sends with Don't Fragment; loopback and jumbo frames: 4096,
  // a quarter of the packets per byte). Like a NIC's MTU, both ends must
  // agree.
  // Sealed packets carry a trailer more (seal/format.h): under prefer too,
  // whose rdma_cm connections may be sealed.
  const bool may_seal = config.seal_required || config.seal_preferred;
  attr_.active_mtu = config.mtu.value_or(
      ActiveMtuForLink(transport_->link_mtu(), may_seal ? seal::kTrailerBytes : 0));
  // The same GUIDs in every process of this host and network namespace, as
  // a NIC's (device_identity.h, shared with `softrnic run`'s sysfs view).
  attr_.node_guid = NodeGuid(CurrentHostIdentity(), kDeviceName);
  attr_.sys_image_guid = attr_.node_guid;
  async_queues_.emplace(Device::kDeviceAsyncQueue, std::make_unique<AsyncQueue>());
  ack_delay_ = config.ack_delay;
  split_tx_ = transport_->accepts_split_payload() && config.zerocopy_tx;
  hold_tx_ = config.tx_batch;
  selective_ = config.selective;  // docs/loss.md
  cc_settings_ = config.cc;
  if (!config.capture.path.empty()) {
    std::string error;
    capture_ = PacketCapture::Open(config.capture, kDeviceName, CaptureDescription(), &error);
    if (capture_ == nullptr)
      SOFTRNIC_LOG(kWarn, "%s; the device runs without capture (SOFTRNIC_CAPTURE)", error.c_str());
    else
      tx_.set_capture(capture_.get());
  }
  OpenTrace();  // SOFTRNIC_TRACE (trace/engine_trace.cc)
}

std::string Engine::CaptureDescription() const {
  std::string description = "softrnic pid " + std::to_string(getpid());
  for (const Gid& g : gids_) description += " gid " + g.ToString();
  return description;
}

Engine::~Engine() {
  StopProgressThread();
  // The device closes: its trace is written now, with every QP still here.
  CloseTrace();
  // Before anything is torn down: its server thread takes mu_ and serves
  // from the SRQ tables (and the progress thread, stopped now, called it).
  xrc_share_.reset();
  // Regions never deregistered: revoke peers' direct access; the pages stay
  // on their memfd (ReleaseRegion says why).
  for (auto& mr : mrs_) {
    if (shm_direct_) shm_direct_->RevokeMr(mr.get());
    ReleaseRegion(mr->share);
    mr->share = SharedRange{};
  }
}



void Engine::StartLinger(Qp* qp) {
  const QpState st = qp->attr.qp_state;
  if (qp->type != QpType::kRc ||
      (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd))
    return;
  Lingering l;
  l.qpn = qp->qpn;
  l.peer = qp->attr.ah_attr.dgid;
  l.dest_qpn = qp->attr.dest_qp_num;
  l.sgid_index = SourceIndex(qp);
  l.epsn = qp->resp.epsn;
  l.msn = qp->resp.msn;
  l.until = Clock::now() + kLinger;
  // Its peer's duplicates arrive sealed and are answered sealed.
  l.seal = std::move(qp->seal);
  lingering_.push_back(std::move(l));
}

bool Engine::IsLingering(uint32_t qpn) const {
  for (const Lingering& l : lingering_)
    if (l.qpn == qpn) return true;
  return false;
}

void Engine::ExpireLingering(Clock::time_point now) {
  std::erase_if(lingering_, [now](const Lingering& l) { return now >= l.until; });
}

bool Engine::ExpireLingeringLocked(Clock::time_point now) {
  ExpireLingering(now);
  return !lingering_.empty();
}

bool Engine::AnswerLingering(const wire::Packet& pkt, const transport::RxPacket& rx) {
  for (const Lingering& l : lingering_) {
    if (l.qpn != pkt.bth.dest_qp()) continue;
    if (!(rx.src.gid == l.peer) || wire::ServiceOf(pkt.opcode()) != wire::Service::kRc ||
        !pkt.info->has(wire::kIsRequest) || wire::PsnDiff(pkt.bth.psn(), l.epsn) >= 0) {
      ++stats_.rx_dropped_unknown_qp;
      return true;
    }
    // A duplicate of something this QP already executed: acknowledge up to
    // the last PSN it accepted (IBA 9.7.5.1.3), nothing else.
    ++stats_.rx_duplicates;
    EmitAck(l.dest_qpn, wire::PsnAdd(l.epsn, wire::kPsnMask), wire::kAckSyndromeNoCredit, l.msn,
            l.sgid_index, l.peer, false, false, l.seal.get());
    return true;
  }
  return false;
}

void Engine::MarkWork(Qp* qp) {
  if (qp->on_work_list) return;
  qp->on_work_list = true;
  work_list_.push_back(qp);
}

void Engine::RunWorkList() {
  // Requesters may add QPs back (e.g. after an ACK opens the window), so
  // iterate over a snapshot.
  std::vector<Qp*> list;
  list.swap(work_list_);
  for (Qp* qp : list) {
    qp->on_work_list = false;
    // A deferred ACK waits for the requester below or for its deadline.
    if (!qp->ack_delay.ack_deferred) FlushAck(qp);
    RunRequester(qp);
  }
  if (work_list_.empty()) {
    list.clear();
    work_list_.swap(list);  // keep the capacity: no allocation next time
  }
}

uint8_t* Engine::StartPacket(const PacketFields& f, uint32_t payload_length) {
  if (tx_.full()) FlushTx();
  return tx_.Start(f, payload_length);
}

void Engine::CommitPacket(uint16_t local_index, const Gid& dst, const uint8_t* direct,
                          seal::QpSeal* seal) {
  last_tx_bytes_ = tx_.Commit(local_index, transport::Endpoint{dst, udp_port_}, direct, seal);
  if (last_tx_bytes_ == 0) {
    ++stats_.tx_seal_errors;  // the cipher failed: not sent, RC recovery resends
    return;
  }
  if (seal != nullptr) ++stats_.tx_sealed_packets;
  ++stats_.tx_packets;
  stats_.tx_bytes += last_tx_bytes_;
}

void Engine::Dropped(uint64_t& counter, const char* why, const transport::RxPacket& rx,
                     uint32_t qpn) {
  ++counter;
  // One call site: all drop reasons share the log's rate limit (a flood of
  // forged packets gives at most 10 lines a second).
  SOFTRNIC_LOG(kDebug, "device %s: dropped a packet from %s port %u to QP 0x%06x: %s",
               name_.c_str(), rx.src.gid.ToString().c_str(), unsigned{rx.src.port}, qpn, why);
}

seal::QpSeal* Engine::SealFor(uint32_t qpn, bool* known) {
  *known = true;
  if (auto it = qps_.find(qpn); it != qps_.end()) return it->second->seal.get();
  for (Lingering& l : lingering_)
    if (l.qpn == qpn) return l.seal.get();
  *known = false;
  return nullptr;
}

bool Engine::OpenSealed(const transport::RxPacket& arrived, transport::RxPacket* opened) {
  const uint8_t* bth = arrived.data;
  const uint32_t qpn = seal::DestQpnOf(bth);
  bool known = false;
  seal::QpSeal* seal = SealFor(qpn, &known);
  if (!known) {
    // A late packet of a QP destroyed meanwhile, or a blind one.
    Dropped(stats_.rx_dropped_unknown_qp, "sealed, to no such QP", arrived, qpn);
    return false;
  }
  if (seal == nullptr) {
    Dropped(stats_.rx_dropped_seal_unexpected, "sealed, to a QP that is not sealed", arrived, qpn);
    return false;
  }
  const wire::OpcodeInfo& info = wire::GetOpcodeInfo(bth[0]);
  if (!info.valid()) {
    Dropped(stats_.rx_dropped_parse, "sealed, with an unknown opcode", arrived, qpn);
    return false;
  }
  uint32_t length = 0;
  switch (seal->Open(arrived.data, arrived.length, info.header_length, &length)) {
    case seal::OpenResult::kOk:
      *opened = arrived;
      opened->length = length;
      ++stats_.rx_sealed_packets;
      return true;
    case seal::OpenResult::kReplay:
      Dropped(stats_.rx_dropped_seal_replay, "sealed, a replay (its counter was seen)", arrived,
              qpn);
      return false;
    case seal::OpenResult::kMalformed:
      Dropped(stats_.rx_dropped_parse, "sealed, too short for its trailer", arrived, qpn);
      return false;
    case seal::OpenResult::kStaleEpoch:
    case seal::OpenResult::kForged:
    case seal::OpenResult::kError:
      break;
  }
  Dropped(stats_.rx_dropped_seal_auth, "sealed, fails authentication (forged, corrupted or another key)",
          arrived, qpn);
  return false;
}

void Engine::DispatchPacket(const transport::RxPacket& arrived) {
  ++stats_.rx_packets;
  stats_.rx_bytes += arrived.length;
  // Sealed RC (docs/sealed.md): a sealed packet (BTH TVer 1) is opened in
  // place by its QP's seal before anything reads it; what follows sees the
  // plain packet. A plain one to a sealed QP is refused below.
  transport::RxPacket opened;
  const bool sealed = seal::IsSealed(arrived.data, arrived.length);
  if (sealed && !OpenSealed(arrived, &opened)) return;
  const transport::RxPacket& rx = sealed ? opened : arrived;
  wire::Packet pkt;
  if (wire::ParsePacket(rx.data, rx.length, &pkt) != wire::ParseError::kOk) {
    Dropped(stats_.rx_dropped_parse, "malformed (headers do not parse)", rx, 0);
    return;
  }
  // softrnic's placement bits mean something only from a same-host ring
  // (wire::Bth::placed); from a network they are reserved bits, ignored
  // (IBA 9.2). Cleared in the packet's bytes too, which the selective
  // repeat store keeps and parses again.
  if (!rx.via_shm && (pkt.bth.placed() || pkt.bth.placed_suffix() || pkt.bth.placed_run())) {
    pkt.bth.set_placed(false);
    pkt.bth.set_placed_suffix(false);
    pkt.bth.set_placed_run(0);
    rx.data[4] = pkt.bth.b[4];
    rx.data[8] = pkt.bth.b[8];
  }
  const wire::Service service = wire::ServiceOf(pkt.opcode());
  if (service == wire::Service::kCnp) {
    // DCQCN reaction point: a CNP names our QP whose flow met congestion.
    // Only the QP's own peer may slow it down.
    auto cnp_qp = qps_.find(pkt.bth.dest_qp());
    if (cnp_qp == qps_.end() || !(rx.src.gid == cnp_qp->second->attr.ah_attr.dgid) ||
        (cnp_qp->second->seal != nullptr && !sealed)) {
      ++stats_.rx_cnp;
      ++stats_.rx_cnp_ignored;
    } else if (!FromPeerPort(*cnp_qp->second, rx, udp_port_)) {
      ++stats_.rx_cnp;
      Dropped(stats_.rx_dropped_source_port, "CNP from a same-host port that is not the peer's", rx,
              pkt.bth.dest_qp());
    } else {
      CountRx(cnp_qp->second.get(), rx.length);
      HandleCnp(cnp_qp->second.get());
    }
    return;
  }
  // IBA 9.2.4 / 10.9: P_Key must match the only entry, 0xFFFF (full) or
  // 0x7FFF (limited), in the low 15 bits.
  if ((pkt.bth.pkey() & 0x7FFF) != 0x7FFF) {
    Dropped(stats_.rx_dropped_pkey, "P_Key is not the default partition's", rx, pkt.bth.dest_qp());
    return;
  }
  if (rx.group != nullptr) {
    DispatchMulticast(pkt, rx);
    return;
  }
  auto it = qps_.find(pkt.bth.dest_qp());
  if (it == qps_.end()) {
    if (!AnswerLingering(pkt, rx))
      Dropped(stats_.rx_dropped_unknown_qp, "no such QP", rx, pkt.bth.dest_qp());
    return;
  }
  Qp* qp = it->second.get();
  if (qp->seal != nullptr && !sealed) {
    Dropped(stats_.rx_dropped_unsealed, "plain, to a sealed QP", rx, qp->qpn);
    return;
  }
  // XRC (xrc.cc): requests only at receive QPs, responses only at send QPs.
  const bool xrc_ok = service == wire::Service::kXrc &&
                      qp->xrc == (pkt.info->has(wire::kIsRequest) ? XrcRole::kRecv : XrcRole::kSend);
  const bool type_ok =
      xrc_ok ||
      (service == wire::Service::kRc && qp->type == QpType::kRc && qp->xrc == XrcRole::kNone) ||
      (service == wire::Service::kUc && qp->type == QpType::kUc) ||
      (service == wire::Service::kUd && qp->type == QpType::kUd);
  if (!type_ok) {
    Dropped(stats_.rx_dropped_service, "opcode of another transport service than the QP's", rx,
            qp->qpn);
    return;
  }
  if (qp->type == QpType::kUd) {
    CountRx(qp, rx.length);
    HandleUdRequest(qp, pkt, rx);
    return;
  }
  // A connected QP only hears from its peer (IBA 9.6.1.5: the source must
  // match the QP's path).
  const QpState s = qp->attr.qp_state;
  if (s == QpState::kReset || s == QpState::kInit) {
    Dropped(stats_.rx_dropped_source, "QP not connected yet (RESET or INIT)", rx, qp->qpn);
    return;
  }
  if (!(rx.src.gid == qp->attr.ah_attr.dgid)) {
    Dropped(stats_.rx_dropped_source, "source address is not the QP's peer", rx, qp->qpn);
    return;
  }
  if (!FromPeerPort(*qp, rx, udp_port_)) {
    Dropped(stats_.rx_dropped_source_port, "same-host source port is not the peer's", rx, qp->qpn);
    return;
  }
  CountRx(qp, rx.length);
  if (pkt.info->has(wire::kIsRequest)) {
    // DCQCN notification point: ECN CE on a request.
    if ((rx.traffic_class & 3) == 3) MaybeSendCnp(qp, rx);
    HandleRequest(qp, pkt, rx);
  } else {
    HandleResponse(qp, pkt);
    DestSync(qp);  // acknowledged packets leave the destination's budget
  }
}

}  // namespace softrnic::engine
