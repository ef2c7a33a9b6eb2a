// The CM protocol (src/rdmacm/cm_protocol.cc) and its transition table
// (cm_transitions.h) against fakes of the layer below: no device, no QP1,
// no sockets. MADs the CM sends are captured from its MAD port
// (Cm::send_mad), MADs from the peer are injected as QP1 would hand them
// over (GRH + MAD into HandleMad), and the retransmission timers run on a
// fake clock (Cm::now). Ids carry no QP, so no verbs call is made.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "rdmacm/cm_internal.h"
#include "rdmacm/cm_transitions.h"
#include "rdmacm/mad.h"

namespace softrnic::rdmacm {
namespace {

constexpr uint32_t kLocalIp = 0x0a000001;  // 10.0.0.1: this process's GID 1
constexpr uint32_t kPeerIp = 0x0a000002;   // 10.0.0.2: the peer
constexpr uint32_t kOtherIp = 0x0a000063;  // 10.0.0.99: a third host
constexpr uint16_t kListenPort = 7000;
constexpr uint32_t kPeerComm = 0x5eed0001;  // the peer's comm ID

struct Sent {
  int sgid_index;
  uint32_t dst_ip;
  CmMsg msg;
  std::vector<uint8_t> bytes;
};
std::vector<Sent>* g_sent = nullptr;
Clock::time_point g_now;

int CaptureMad(int sgid_index, const ibv_gid& dgid, const uint8_t* mad) {
  Sent s;
  s.sgid_index = sgid_index;
  s.dst_ip = IpFromGid(dgid.raw);
  EXPECT_TRUE(DecodeCm(mad, kMadSize, &s.msg)) << "the CM sent a MAD it cannot decode";
  s.bytes.assign(mad, mad + kMadSize);
  g_sent->push_back(s);
  return 0;
}
Clock::time_point FakeNow() { return g_now; }

class CmProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ResetCmForTest();
    g_sent = &sent_;
    g_now = Clock::time_point{} + std::chrono::hours(1);
    Cm& g = G();
    g.started = true;  // rdma_* calls find the CM up (no device: ids get none)
    g.send_mad = &CaptureMad;
    g.now = &FakeNow;
    g.gid_ip = {0, kLocalIp};
    g.loop_idx = -1;  // nothing to publish in the host registry
    chan_ = NewChannel();
    ASSERT_NE(chan_, nullptr);
    fcntl(chan_->ch.fd, F_SETFL, O_NONBLOCK);  // NextEvent never blocks
  }

  void TearDown() override {
    std::vector<Id*> ids(G().ids.begin(), G().ids.end());
    for (Id* id : ids) {
      id->registered = false;  // never published (loop_idx < 0)
      rdma_destroy_id(&id->id);
    }
    FreeChannel(chan_);
    g_sent = nullptr;
  }

  // An id with its route resolved to the peer (what rdma_resolve_addr and
  // rdma_resolve_route leave behind), on chan_.
  Id* ActiveId(ibv_qp_type qpt = IBV_QPT_RC) {
    std::lock_guard<std::mutex> l(G().mu);
    Id* id = NewIdLocked(chan_, nullptr, qpt == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP, qpt);
    sockaddr_in& s = id->id.route.addr.src_sin;
    s.sin_family = AF_INET;
    s.sin_port = htons(40000);
    s.sin_addr.s_addr = htonl(kLocalIp);
    sockaddr_in& d = id->id.route.addr.dst_sin;
    d.sin_family = AF_INET;
    d.sin_port = htons(kListenPort);
    d.sin_addr.s_addr = htonl(kPeerIp);
    id->bound = true;
    id->sgid_index = 1;
    SetGidFromIp(&id->dgid, kPeerIp);
    id->st = St::kRouteResolved;
    return id;
  }

  Id* Listener(ibv_qp_type qpt = IBV_QPT_RC) {
    Id* l;
    {
      std::lock_guard<std::mutex> lock(G().mu);
      l = NewIdLocked(chan_, nullptr, qpt == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP, qpt);
      sockaddr_in& s = l->id.route.addr.src_sin;
      s.sin_family = AF_INET;
      s.sin_port = htons(kListenPort);
      s.sin_addr.s_addr = htonl(kLocalIp);
      l->bound = true;
    }
    EXPECT_EQ(rdma_listen(&l->id, 8), 0);
    EXPECT_EQ(l->st, St::kListen);
    return l;
  }

  // A MAD from `src_ip` as QP1 hands it to the CM: GRH (IPv4 addresses in
  // bytes 32..39) + the MAD.
  void Inject(const CmMsg& m, uint32_t src_ip = kPeerIp) {
    uint8_t buf[kGrh + kMadSize] = {};
    const uint32_t s = htonl(src_ip), d = htonl(kLocalIp);
    std::memcpy(buf + 32, &s, 4);
    std::memcpy(buf + 36, &d, 4);
    EncodeCm(m, buf + kGrh);
    std::lock_guard<std::mutex> l(G().mu);  // as the CM thread holds it
    HandleMad(buf, sizeof buf);
  }

  // A MAD from IPv6 address `from` to `to`: the 40-byte IPv6 header in
  // QP1's GRH area + the MAD.
  void Inject6(const CmMsg& m, const ibv_gid& from, const ibv_gid& to) {
    uint8_t buf[kGrh + kMadSize] = {};
    buf[0] = 0x60;  // IPv6 header: version 6
    std::memcpy(buf + 8, from.raw, 16);
    std::memcpy(buf + 24, to.raw, 16);
    EncodeCm(m, buf + kGrh);
    std::lock_guard<std::mutex> l(G().mu);
    HandleMad(buf, sizeof buf);
  }

  // What the peer sends next on a connection: its comm ID, ours.
  static CmMsg FromPeer(uint16_t attr, const Id* id) {
    CmMsg m;
    m.attr = attr;
    m.local_comm_id = kPeerComm;
    m.remote_comm_id = id->local_comm_id;
    m.pdata_len = PrivateDataSize(attr);
    return m;
  }

  static CmMsg Req(uint16_t attr = kAttrReq, int ps = RDMA_PS_TCP) {
    CmMsg m;
    m.attr = attr;
    m.local_comm_id = kPeerComm;
    m.service_id = uint64_t(ps) << 16 | kListenPort;
    m.qpn = 0x123;
    m.starting_psn = 0x4567;
    m.responder_resources = 4;
    m.initiator_depth = 2;
    m.retry_count = 7;
    m.rnr_retry_count = 7;
    CmaHdr h;
    h.src_addr = htonl(kPeerIp);
    h.dst_addr = htonl(kLocalIp);
    h.src_port = htons(41000);
    EncodeCmaHdr(m.pdata, h);
    m.pdata[kCmaHdr] = 0xab;  // the first byte of the application's data
    m.pdata_len = PrivateDataSize(attr);
    return m;
  }

  void AdvanceAndRunTimers(int ms) {
    g_now += std::chrono::milliseconds(ms);
    std::lock_guard<std::mutex> l(G().mu);
    RunTimers();
  }

  // The next event on chan_ (acked), or type -1 when there is none.
  struct Ev {
    int type = -1;
    int status = 0;
    rdma_cm_id* id = nullptr;
    rdma_cm_id* listen_id = nullptr;
    uint8_t first_pdata = 0;
    int pdata_len = 0;
  };
  Ev NextEvent() {
    Ev out;
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(&chan_->ch, &e) != 0) {
      EXPECT_EQ(errno, EAGAIN);
      return out;
    }
    out.type = e->event;
    out.status = e->status;
    out.id = e->id;
    out.listen_id = e->listen_id;
    out.pdata_len = e->param.conn.private_data_len;
    if (e->param.conn.private_data_len) out.first_pdata = static_cast<const uint8_t*>(e->param.conn.private_data)[0];
    rdma_ack_cm_event(e);
    return out;
  }

  // An active id in REQ Sent; the REQ is the last MAD sent.
  Id* Connecting(ibv_qp_type qpt = IBV_QPT_RC) {
    Id* id = ActiveId(qpt);
    rdma_conn_param p{};
    p.responder_resources = 3;
    p.initiator_depth = 3;
    p.retry_count = 5;
    p.rnr_retry_count = 6;
    p.qp_num = 0x99;
    EXPECT_EQ(rdma_connect(&id->id, &p), 0);
    EXPECT_EQ(id->st, St::kReqSent);
    return id;
  }

  // A passive id in REQ Rcvd (its CONNECT_REQUEST taken).
  Id* Requested(Id* listener) {
    Inject(Req(listener->id.qp_type == IBV_QPT_UD ? kAttrSidrReq : kAttrReq,
               listener->id.qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP));
    const Ev e = NextEvent();
    EXPECT_EQ(e.type, RDMA_CM_EVENT_CONNECT_REQUEST);
    EXPECT_EQ(e.listen_id, &listener->id);
    Id* c = e.id ? ToId(e.id) : nullptr;
    if (c) {
      EXPECT_EQ(c->st, St::kReqRcvd);
    }
    return c;
  }

  Id* Accepted(Id* listener) {
    Id* c = Requested(listener);
    rdma_conn_param p{};
    p.qp_num = 0x77;
    EXPECT_EQ(rdma_accept(&c->id, &p), 0);
    EXPECT_EQ(c->st, St::kRepSent);
    return c;
  }

  std::vector<Sent> sent_;
  Channel* chan_ = nullptr;
};

TEST_F(CmProtocolTest, ConnectSendsReqWithTheParameters) {
  Id* id = Connecting();
  ASSERT_EQ(sent_.size(), 1u);
  const CmMsg& req = sent_[0].msg;
  EXPECT_EQ(req.attr, kAttrReq);
  EXPECT_EQ(sent_[0].dst_ip, kPeerIp);
  EXPECT_EQ(req.local_comm_id, id->local_comm_id);
  EXPECT_NE(req.local_comm_id, 0u);
  EXPECT_EQ(req.service_id, uint64_t(RDMA_PS_TCP) << 16 | kListenPort);
  EXPECT_EQ(req.qpn, 0x99u);
  EXPECT_EQ(req.starting_psn, id->local_psn);
  EXPECT_EQ(req.responder_resources, 3);
  EXPECT_EQ(req.retry_count, 5);
  EXPECT_EQ(req.rnr_retry_count, 6);
  const CmaHdr h = DecodeCmaHdr(req.pdata);
  EXPECT_EQ(ntohl(h.src_addr), kLocalIp);
  EXPECT_EQ(ntohl(h.dst_addr), kPeerIp);
  EXPECT_EQ(ntohs(h.src_port), 40000);
  EXPECT_EQ(id->timer, Timer::kReq);
}

TEST_F(CmProtocolTest, ActiveRepWithoutQpThenEstablishSendsRtu) {
  Id* id = Connecting();
  CmMsg rep = FromPeer(kAttrRep, id);
  rep.qpn = 0x321;
  rep.starting_psn = 0x777;
  rep.responder_resources = 1;
  rep.pdata[0] = 0x42;
  Inject(rep);
  EXPECT_EQ(id->st, St::kRepRcvd);
  EXPECT_EQ(id->timer, Timer::kNone);
  EXPECT_EQ(id->remote_comm_id, kPeerComm);
  EXPECT_EQ(id->remote_qpn, 0x321u);
  EXPECT_EQ(id->remote_psn, 0x777u);
  EXPECT_EQ(id->init_depth, 1) << "our initiator depth is capped by the peer's responder resources";
  Ev e = NextEvent();
  EXPECT_EQ(e.type, RDMA_CM_EVENT_CONNECT_RESPONSE);
  EXPECT_EQ(e.first_pdata, 0x42);
  EXPECT_EQ(e.pdata_len, int(kRepPdata));
  ASSERT_EQ(sent_.size(), 1u) << "no RTU before rdma_establish";

  ASSERT_EQ(rdma_establish(&id->id), 0);
  EXPECT_EQ(id->st, St::kConnected);
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].msg.attr, kAttrRtu);
  EXPECT_EQ(sent_[1].msg.local_comm_id, id->local_comm_id);
  EXPECT_EQ(sent_[1].msg.remote_comm_id, kPeerComm);

  // The REP again: our RTU was lost, it goes again; nothing else changes.
  Inject(rep);
  EXPECT_EQ(id->st, St::kConnected);
  ASSERT_EQ(sent_.size(), 3u);
  EXPECT_EQ(sent_[2].msg.attr, kAttrRtu);
  EXPECT_EQ(NextEvent().type, -1);
}

TEST_F(CmProtocolTest, PassiveReqRepRtuEstablishes) {
  Id* l = Listener();
  Inject(Req());
  const Ev req_ev = NextEvent();
  ASSERT_EQ(req_ev.type, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(req_ev.listen_id, &l->id);
  EXPECT_EQ(req_ev.first_pdata, 0xab) << "the application's data follows rdma_cm's IP header";
  Id* c = ToId(req_ev.id);
  EXPECT_EQ(c->st, St::kReqRcvd);
  EXPECT_EQ(c->remote_comm_id, kPeerComm);
  EXPECT_EQ(c->remote_qpn, 0x123u);
  EXPECT_EQ(ntohs(c->id.route.addr.dst_sin.sin_port), 41000);
  EXPECT_EQ(ntohl(c->id.route.addr.dst_sin.sin_addr.s_addr), kPeerIp);

  rdma_conn_param p{};
  p.qp_num = 0x77;
  p.private_data = "\x11";
  p.private_data_len = 1;
  ASSERT_EQ(rdma_accept(&c->id, &p), 0);
  EXPECT_EQ(c->st, St::kRepSent);
  ASSERT_EQ(sent_.size(), 1u);
  const CmMsg& rep = sent_[0].msg;
  EXPECT_EQ(rep.attr, kAttrRep);
  EXPECT_EQ(rep.local_comm_id, c->local_comm_id);
  EXPECT_EQ(rep.remote_comm_id, kPeerComm);
  EXPECT_EQ(rep.qpn, 0x77u);
  EXPECT_EQ(rep.starting_psn, c->local_psn);
  EXPECT_EQ(rep.pdata[0], 0x11);
  EXPECT_EQ(c->timer, Timer::kRep);

  Inject(FromPeer(kAttrRtu, c));
  EXPECT_EQ(c->st, St::kConnected);
  EXPECT_EQ(c->timer, Timer::kNone);
  const Ev est = NextEvent();
  EXPECT_EQ(est.type, RDMA_CM_EVENT_ESTABLISHED);
  EXPECT_EQ(est.id, &c->id);
}

// The path MTU (issue 17): the active side's REQ carries the MTU its route
// resolution took from the port, and its RTR attributes use it; the passive
// side adopts the REQ's, as the kernel's CM does, so both ends agree; a
// value outside 256..4096 gets the default 1024.
TEST_F(CmProtocolTest, PathMtuTravelsInTheReqAndBothSidesUseIt) {
  Id* id = ActiveId();
  id->path_mtu = IBV_MTU_4096;  // what rdma_resolve_route took from the port
  rdma_conn_param p{};
  p.qp_num = 0x99;
  ASSERT_EQ(rdma_connect(&id->id, &p), 0);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.mtu, IBV_MTU_4096);
  CmMsg rep = FromPeer(kAttrRep, id);
  rep.qpn = 0x321;
  Inject(rep);
  ASSERT_EQ(NextEvent().type, RDMA_CM_EVENT_CONNECT_RESPONSE);
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(rdma_init_qp_attr(&id->id, &a, &mask), 0);
  EXPECT_TRUE(mask & IBV_QP_PATH_MTU);
  EXPECT_EQ(a.path_mtu, IBV_MTU_4096);

  Id* l = Listener();
  for (const auto& [sent, want] : {std::pair{IBV_MTU_2048, IBV_MTU_2048},
                                   std::pair{IBV_MTU_256, IBV_MTU_256},
                                   std::pair{static_cast<ibv_mtu>(7), IBV_MTU_1024},
                                   std::pair{static_cast<ibv_mtu>(0), IBV_MTU_1024}}) {
    CmMsg req = Req();
    req.local_comm_id = kPeerComm + sent;  // a new connection each time
    req.mtu = static_cast<uint8_t>(sent);
    Inject(req);
    const Ev e = NextEvent();
    ASSERT_EQ(e.type, RDMA_CM_EVENT_CONNECT_REQUEST) << "REQ mtu " << sent;
    ASSERT_EQ(e.listen_id, &l->id);
    ibv_qp_attr pa{};
    pa.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(rdma_init_qp_attr(e.id, &pa, &mask), 0);
    EXPECT_EQ(pa.path_mtu, want) << "REQ mtu " << sent;
  }
}

// IPv6 (issue 15): a REQ arriving from an IPv6 peer (the 40-byte IPv6
// header in QP1's GRH area) whose rdma_cm header says IP version 6 gives a
// connection with sockaddr_in6 addresses, the local IPv6 GID as source, and
// the answer goes to the peer's IPv6 GID; a DREQ from another IPv6 address
// is ignored.
TEST_F(CmProtocolTest, Ipv6ReqGivesSockaddrIn6AndAnswersTheIpv6Peer) {
  ibv_gid local6{}, peer6{}, other6{};
  inet_pton(AF_INET6, "fd77:243::1", local6.raw);
  inet_pton(AF_INET6, "fd77:243::2", peer6.raw);
  inet_pton(AF_INET6, "fd77:243::3", other6.raw);
  G().gid_ip = {0, kLocalIp, 0};
  G().gid6 = {ibv_gid{}, ibv_gid{}, local6};
  EXPECT_EQ(GidIndexForGid(local6), 2);
  EXPECT_EQ(GidIndexForGid(peer6), -1);
  Listener();
  CmMsg req = Req();
  CmaHdr h;
  h.ipv6 = true;
  std::memcpy(h.src6, peer6.raw, 16);
  std::memcpy(h.dst6, local6.raw, 16);
  h.src_port = htons(41000);
  EncodeCmaHdr(req.pdata, h);
  auto inject6 = [&](const CmMsg& m, const ibv_gid& from) { Inject6(m, from, local6); };
  inject6(req, peer6);
  const Ev ev = NextEvent();
  ASSERT_EQ(ev.type, RDMA_CM_EVENT_CONNECT_REQUEST);
  Id* c = ToId(ev.id);
  EXPECT_EQ(c->sgid_index, 2);
  EXPECT_EQ(std::memcmp(c->dgid.raw, peer6.raw, 16), 0);
  EXPECT_EQ(std::memcmp(c->id.route.addr.addr.ibaddr.sgid.raw, local6.raw, 16), 0);
  const sockaddr_in6& d = c->id.route.addr.dst_sin6;
  ASSERT_EQ(d.sin6_family, AF_INET6);
  EXPECT_EQ(ntohs(d.sin6_port), 41000);
  EXPECT_EQ(std::memcmp(&d.sin6_addr, peer6.raw, 16), 0);
  const sockaddr_in6& s = c->id.route.addr.src_sin6;
  ASSERT_EQ(s.sin6_family, AF_INET6);
  EXPECT_EQ(ntohs(s.sin6_port), kListenPort);
  EXPECT_EQ(std::memcmp(&s.sin6_addr, local6.raw, 16), 0);
  EXPECT_EQ(rdma_get_src_port(&c->id), htons(kListenPort));

  rdma_conn_param p{};
  p.qp_num = 0x77;
  ASSERT_EQ(rdma_accept(&c->id, &p), 0);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrRep);
  EXPECT_EQ(sent_[0].sgid_index, 2);
  inject6(FromPeer(kAttrRtu, c), peer6);
  EXPECT_EQ(c->st, St::kConnected);
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_ESTABLISHED);
  // A DREQ naming the connection from another IPv6 address is not the peer's.
  const uint64_t ignored = G().ignored_mads;
  inject6(FromPeer(kAttrDreq, c), other6);
  EXPECT_EQ(c->st, St::kConnected);
  EXPECT_EQ(G().ignored_mads, ignored + 1);
  inject6(FromPeer(kAttrDreq, c), peer6);
  EXPECT_NE(c->st, St::kConnected);
}

TEST(CmaHeaderTest, Ipv6RoundTripsWithVersion6AndFullAddresses) {
  uint8_t pdata[kCmaHdr] = {};
  CmaHdr h;
  h.ipv6 = true;
  for (int i = 0; i < 16; ++i) {
    h.src6[i] = uint8_t(i + 1);
    h.dst6[i] = uint8_t(0xf0 + i);
  }
  h.src_port = htons(4242);
  EncodeCmaHdr(pdata, h);
  EXPECT_EQ(pdata[0], 0);
  EXPECT_EQ(pdata[1], 0x60) << "IP version 6 in the high nibble (IBA A11)";
  EXPECT_EQ(pdata[4], 1);     // source address at byte 4
  EXPECT_EQ(pdata[20], 0xf0);  // destination address at byte 20
  const CmaHdr back = DecodeCmaHdr(pdata);
  EXPECT_TRUE(back.ipv6);
  EXPECT_EQ(std::memcmp(back.src6, h.src6, 16), 0);
  EXPECT_EQ(std::memcmp(back.dst6, h.dst6, 16), 0);
  EXPECT_EQ(back.src_port, h.src_port);
  CmaHdr v4;
  v4.src_addr = htonl(kPeerIp);
  v4.dst_addr = htonl(kLocalIp);
  EncodeCmaHdr(pdata, v4);
  EXPECT_EQ(pdata[1], 0x40);
  const CmaHdr back4 = DecodeCmaHdr(pdata);
  EXPECT_FALSE(back4.ipv6);
  EXPECT_EQ(back4.src_addr, v4.src_addr);
}

TEST_F(CmProtocolTest, DuplicateReqGetsTheStoredRepAgain) {
  Id* l = Listener();
  Id* c = Accepted(l);
  ASSERT_EQ(sent_.size(), 1u);
  Inject(Req());  // the client missed our REP
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].bytes, sent_[0].bytes);
  EXPECT_EQ(c->st, St::kRepSent);
  EXPECT_EQ(NextEvent().type, -1) << "no second CONNECT_REQUEST";
  EXPECT_EQ(G().ids.size(), 2u) << "no second passive id";
}

TEST_F(CmProtocolTest, DuplicateReqAfterRejectGetsTheStoredRej) {
  Id* l = Listener();
  Id* c = Requested(l);
  ASSERT_EQ(rdma_reject(&c->id, "no", 2), 0);
  EXPECT_EQ(c->st, St::kRejected);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrRej);
  EXPECT_EQ(sent_[0].msg.reason, kRejConsumer);
  Inject(Req());
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].bytes, sent_[0].bytes);
}

TEST_F(CmProtocolTest, DuplicateReqBeforeTheAnswerIsDropped) {
  Id* l = Listener();
  Id* c = Requested(l);
  const uint64_t unexpected = G().unexpected_events;
  Inject(Req());
  EXPECT_TRUE(sent_.empty()) << "nothing to answer with yet";
  EXPECT_EQ(c->st, St::kReqRcvd);
  EXPECT_EQ(G().unexpected_events, unexpected + 1);
}

TEST_F(CmProtocolTest, ReqForAPortNobodyListensOnIsRejectedWithReason8) {
  Inject(Req());
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrRej);
  EXPECT_EQ(sent_[0].msg.reason, kRejInvalidServiceId);
  EXPECT_EQ(sent_[0].msg.remote_comm_id, kPeerComm);
  EXPECT_TRUE(G().ids.empty());
}

TEST_F(CmProtocolTest, DreqFromTheWrongAddressOrCommIdIsIgnored) {
  Id* l = Listener();
  Id* c = Accepted(l);
  Inject(FromPeer(kAttrRtu, c));
  ASSERT_EQ(NextEvent().type, RDMA_CM_EVENT_ESTABLISHED);
  sent_.clear();
  const uint64_t ignored = G().ignored_mads;

  Inject(FromPeer(kAttrDreq, c), kOtherIp);  // right IDs, wrong address
  CmMsg wrong_peer_id = FromPeer(kAttrDreq, c);
  wrong_peer_id.local_comm_id = kPeerComm + 1;
  Inject(wrong_peer_id);  // right address, another peer comm ID
  EXPECT_EQ(c->st, St::kConnected);
  EXPECT_EQ(G().ignored_mads, ignored + 2);
  EXPECT_EQ(NextEvent().type, -1);
  EXPECT_TRUE(sent_.empty()) << "no DREP to a forged DREQ of a known connection";

  Inject(FromPeer(kAttrDreq, c));
  EXPECT_EQ(c->st, St::kDisconnected);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrDrep);
  EXPECT_EQ(sent_[0].msg.local_comm_id, c->local_comm_id);
  EXPECT_EQ(sent_[0].msg.remote_comm_id, kPeerComm);
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_DISCONNECTED);

  // Again (our DREP was lost): answered, but DISCONNECTED only once.
  Inject(FromPeer(kAttrDreq, c));
  EXPECT_EQ(sent_.size(), 2u);
  EXPECT_EQ(NextEvent().type, -1);
}

TEST_F(CmProtocolTest, DreqForNoConnectionIsAnsweredWithADrep) {
  CmMsg m;
  m.attr = kAttrDreq;
  m.local_comm_id = kPeerComm;
  m.remote_comm_id = 0xdead;
  Inject(m);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrDrep);
  EXPECT_EQ(sent_[0].msg.remote_comm_id, kPeerComm);
}

TEST_F(CmProtocolTest, DisconnectSendsDreqAndDrepEndsIt) {
  Id* id = Connecting();
  Inject(FromPeer(kAttrRep, id));
  ASSERT_EQ(rdma_establish(&id->id), 0);
  while (NextEvent().type != -1) {
  }
  sent_.clear();
  ASSERT_EQ(rdma_disconnect(&id->id), 0);
  EXPECT_EQ(id->st, St::kDreqSent);
  EXPECT_EQ(id->timer, Timer::kDreq);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrDreq);
  Inject(FromPeer(kAttrDrep, id));
  EXPECT_EQ(id->st, St::kDisconnected);
  EXPECT_EQ(id->timer, Timer::kTimeWait);
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_DISCONNECTED);
  // A second rdma_disconnect is fine (the QP would go to ERR) and sends nothing.
  EXPECT_EQ(rdma_disconnect(&id->id), 0);
  EXPECT_EQ(sent_.size(), 1u);
  // TimeWait (IBA 12.9), then TIMEWAIT_EXIT, once.
  AdvanceAndRunTimers(TimeWaitMs() - 1);
  EXPECT_EQ(NextEvent().type, -1);
  AdvanceAndRunTimers(1);
  const Ev exit = NextEvent();
  EXPECT_EQ(exit.type, RDMA_CM_EVENT_TIMEWAIT_EXIT);
  EXPECT_EQ(exit.id, &id->id);
  EXPECT_EQ(exit.status, 0);
  EXPECT_EQ(id->timer, Timer::kNone);
  EXPECT_EQ(id->st, St::kDisconnected);
  AdvanceAndRunTimers(10 * TimeWaitMs());
  EXPECT_EQ(NextEvent().type, -1);
  EXPECT_EQ(sent_.size(), 1u);
  EXPECT_EQ(rdma_disconnect(&id->id), 0);  // still allowed after TimeWait
}

// The passive side enters TimeWait when it answers the peer's DREQ and gets
// its TIMEWAIT_EXIT as well (tgt frees an iSER connection only then); an id
// destroyed in TimeWait gets none, and its timer goes with it.
TEST_F(CmProtocolTest, TimeWaitExitFollowsADreqAndNotADestroyedId) {
  Id* l = Listener();
  Id* c = Accepted(l);
  Inject(FromPeer(kAttrRtu, c));
  while (NextEvent().type != -1) {
  }
  Inject(FromPeer(kAttrDreq, c));
  EXPECT_EQ(c->st, St::kDisconnected);
  EXPECT_EQ(c->timer, Timer::kTimeWait);
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_DISCONNECTED);
  // The same DREQ again (our DREP was lost) is answered and does not
  // restart TimeWait.
  AdvanceAndRunTimers(TimeWaitMs() / 2);
  Inject(FromPeer(kAttrDreq, c));
  AdvanceAndRunTimers(TimeWaitMs() - TimeWaitMs() / 2);
  const Ev exit = NextEvent();
  EXPECT_EQ(exit.type, RDMA_CM_EVENT_TIMEWAIT_EXIT);
  EXPECT_EQ(exit.id, &c->id);
  EXPECT_EQ(NextEvent().type, -1);
  ASSERT_EQ(rdma_destroy_id(&c->id), 0);  // the next REQ (same peer comm ID) is a new one

  Id* d = Accepted(l);
  Inject(FromPeer(kAttrRtu, d));
  while (NextEvent().type != -1) {
  }
  Inject(FromPeer(kAttrDreq, d));
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_DISCONNECTED);
  const size_t timers = G().timers.size();
  ASSERT_EQ(rdma_destroy_id(&d->id), 0);
  EXPECT_EQ(G().timers.size(), timers - 1);
  AdvanceAndRunTimers(TimeWaitMs());
  EXPECT_EQ(NextEvent().type, -1);
}

TEST_F(CmProtocolTest, RejInEachStateThatExpectsOne) {
  // REQ Sent (active, before any REP).
  Id* active = Connecting();
  CmMsg rej = FromPeer(kAttrRej, active);
  rej.local_comm_id = 0;  // the peer's ID is not known yet here: not checked
  rej.reason = kRejConsumer;
  rej.pdata[0] = 0x5a;
  Inject(rej);
  EXPECT_EQ(active->st, St::kRejected);
  EXPECT_EQ(active->timer, Timer::kNone);
  Ev e = NextEvent();
  EXPECT_EQ(e.type, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(e.status, kRejConsumer);
  EXPECT_EQ(e.first_pdata, 0x5a);
  EXPECT_EQ(e.pdata_len, int(kRejPdata));

  // REP Rcvd (active, REP taken, no rdma_establish yet).
  Id* active2 = Connecting();
  Inject(FromPeer(kAttrRep, active2));
  ASSERT_EQ(NextEvent().type, RDMA_CM_EVENT_CONNECT_RESPONSE);
  CmMsg rej2 = FromPeer(kAttrRej, active2);
  rej2.reason = kRejConsumer;
  Inject(rej2);
  EXPECT_EQ(active2->st, St::kRejected);
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_REJECTED);

  // REP Sent (passive, waiting for the RTU).
  Id* l = Listener();
  Id* c = Accepted(l);
  CmMsg rej3 = FromPeer(kAttrRej, c);
  rej3.reason = kRejConsumer;
  Inject(rej3);
  EXPECT_EQ(c->st, St::kRejected);
  EXPECT_EQ(c->timer, Timer::kNone);
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_REJECTED);

  // Established: not in the table, dropped.
  Id* l2 = l;  // reuse the listener: a second client comm ID
  (void)l2;
  Id* est = Connecting();
  Inject(FromPeer(kAttrRep, est));
  ASSERT_EQ(rdma_establish(&est->id), 0);
  while (NextEvent().type != -1) {
  }
  const uint64_t unexpected = G().unexpected_events;
  CmMsg rej4 = FromPeer(kAttrRej, est);
  rej4.reason = kRejConsumer;
  Inject(rej4);
  EXPECT_EQ(est->st, St::kConnected);
  EXPECT_EQ(G().unexpected_events, unexpected + 1);
  EXPECT_EQ(NextEvent().type, -1);
}

TEST_F(CmProtocolTest, RejInvalidServiceIdRetriesTheReqBeforeRejected) {
  Id* id = Connecting();
  CmMsg rej = FromPeer(kAttrRej, id);
  rej.local_comm_id = 0;
  rej.reason = kRejInvalidServiceId;
  int reqs = 1;
  for (int i = 0; i < kLookups; ++i) {
    Inject(rej);
    ASSERT_EQ(id->st, St::kReqSent) << "retry " << i;
    AdvanceAndRunTimers(kLookupMs);
    ++reqs;
    ASSERT_EQ(int(sent_.size()), reqs);
    EXPECT_EQ(sent_.back().bytes, sent_[0].bytes) << "the same REQ again";
  }
  Inject(rej);
  EXPECT_EQ(id->st, St::kRejected);
  const Ev e = NextEvent();
  EXPECT_EQ(e.type, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(e.status, kRejInvalidServiceId);
}

TEST_F(CmProtocolTest, ReqRetriesThenUnreachable) {
  Id* id = Connecting();
  for (int i = 0; i < Retries(); ++i) {
    AdvanceAndRunTimers(RetryMs() - 1);
    ASSERT_EQ(int(sent_.size()), 1 + i) << "not before the interval";
    AdvanceAndRunTimers(1);
    ASSERT_EQ(int(sent_.size()), 2 + i);
    EXPECT_EQ(sent_.back().bytes, sent_[0].bytes);
    EXPECT_EQ(id->st, St::kReqSent);
  }
  EXPECT_EQ(NextEvent().type, -1);
  AdvanceAndRunTimers(RetryMs());
  EXPECT_EQ(int(sent_.size()), 1 + Retries()) << "no more REQs";
  EXPECT_EQ(id->st, St::kError);
  EXPECT_EQ(id->timer, Timer::kNone);
  const Ev e = NextEvent();
  EXPECT_EQ(e.type, RDMA_CM_EVENT_UNREACHABLE);
  EXPECT_EQ(e.status, -ETIMEDOUT);
  AdvanceAndRunTimers(10 * RetryMs());
  EXPECT_EQ(NextEvent().type, -1) << "the timeout is reported once";
}

TEST_F(CmProtocolTest, RepRetriesThenConnectError) {
  Id* l = Listener();
  Id* c = Accepted(l);
  for (int i = 0; i <= Retries(); ++i) AdvanceAndRunTimers(RetryMs());
  EXPECT_EQ(int(sent_.size()), 1 + Retries());
  EXPECT_EQ(c->st, St::kError);
  const Ev e = NextEvent();
  EXPECT_EQ(e.type, RDMA_CM_EVENT_CONNECT_ERROR);
  EXPECT_EQ(e.status, -ETIMEDOUT);
  Inject(FromPeer(kAttrRtu, c));  // too late
  EXPECT_EQ(c->st, St::kError);
  EXPECT_EQ(NextEvent().type, -1);
}

TEST_F(CmProtocolTest, SidrReqRepEstablishesAUdId) {
  Id* id = Connecting(IBV_QPT_UD);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrSidrReq);
  CmMsg rep;
  rep.attr = kAttrSidrRep;
  rep.local_comm_id = id->local_comm_id;  // SIDR_REP names the request ID only
  rep.sidr_status = kSidrOk;
  rep.qpn = 0x55;
  rep.qkey = 0x1234;
  Inject(rep);
  EXPECT_EQ(id->st, St::kConnected);
  EXPECT_EQ(id->remote_qpn, 0x55u);
  EXPECT_EQ(id->remote_qkey, 0x1234u);
  EXPECT_EQ(NextEvent().type, RDMA_CM_EVENT_ESTABLISHED);

  Id* id2 = Connecting(IBV_QPT_UD);
  rep.local_comm_id = id2->local_comm_id;
  rep.sidr_status = kSidrReject;
  Inject(rep);
  EXPECT_EQ(id2->st, St::kRejected);
  const Ev e = NextEvent();
  EXPECT_EQ(e.type, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(e.status, kRejConsumer);
}

TEST_F(CmProtocolTest, ApiCallsOutsideTheTableFailWithEinval) {
  Id* id = ActiveId();
  id->st = St::kIdle;
  EXPECT_EQ(rdma_connect(&id->id, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_accept(&id->id, nullptr), -1);
  EXPECT_EQ(rdma_reject(&id->id, nullptr, 0), -1);
  EXPECT_EQ(rdma_establish(&id->id), -1);
  EXPECT_EQ(rdma_disconnect(&id->id), -1);
  EXPECT_EQ(rdma_resolve_route(&id->id, 0), -1);
  EXPECT_EQ(id->st, St::kIdle);
  EXPECT_TRUE(sent_.empty());
}

TEST_F(CmProtocolTest, DestroyTellsThePeer) {
  Id* l = Listener();
  Id* requested = Requested(l);
  ASSERT_EQ(rdma_destroy_id(&requested->id), 0);  // an unanswered request: REJ
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrRej);
  EXPECT_EQ(sent_[0].msg.remote_comm_id, kPeerComm);

  Id* c = Accepted(l);  // a new REQ from the same peer comm ID: a new id
  Inject(FromPeer(kAttrRtu, c));
  sent_.clear();
  ASSERT_EQ(rdma_destroy_id(&c->id), 0);  // a connection: DREQ
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrDreq);
}

// An id destroyed before the peer answered its DREQ (rdma_disconnect, then
// rdma_destroy_id, as rping's client does before it exits) leaves the DREQ
// to the CM, which sends it again until the DREP comes: a lost DREQ must
// not leave the peer connected to nobody (the kernel's CM does the same
// from TimeWait).
TEST_F(CmProtocolTest, DestroyedIdsDreqGoesAgainUntilItsDrep) {
  Id* id = Connecting();
  Inject(FromPeer(kAttrRep, id));
  ASSERT_EQ(rdma_establish(&id->id), 0);
  while (NextEvent().type != -1) {
  }
  ASSERT_EQ(rdma_disconnect(&id->id), 0);
  const CmMsg drep = FromPeer(kAttrDrep, id);
  const uint32_t ours = id->local_comm_id;
  sent_.clear();
  ASSERT_EQ(rdma_destroy_id(&id->id), 0);
  EXPECT_TRUE(sent_.empty());  // its DREQ went at rdma_disconnect

  for (int i = 0; i < 2; ++i) {
    AdvanceAndRunTimers(RetryMs());
    ASSERT_EQ(sent_.size(), size_t(i + 1));
    EXPECT_EQ(sent_[i].msg.attr, kAttrDreq);
    EXPECT_EQ(sent_[i].msg.local_comm_id, ours);
    EXPECT_EQ(sent_[i].msg.remote_comm_id, kPeerComm);
    EXPECT_EQ(sent_[i].dst_ip, kPeerIp);
  }
  // A DREP from another address or for another connection ends nothing.
  Inject(drep, kOtherIp);
  CmMsg other = drep;
  other.local_comm_id = kPeerComm + 1;
  Inject(other);
  AdvanceAndRunTimers(RetryMs());
  EXPECT_EQ(sent_.size(), 3u);
  // The DREP ends it.
  Inject(drep);
  const size_t before = sent_.size();
  for (int i = 0; i < 3; ++i) AdvanceAndRunTimers(RetryMs());
  for (size_t i = before; i < sent_.size(); ++i) EXPECT_NE(sent_[i].msg.attr, kAttrDreq);
  EXPECT_TRUE(G().lingering.empty());
}

// With no DREP ever (the peer is gone), the DREQ goes SOFTRNIC_CM_RETRIES
// times more, as a live id's would, and then the CM forgets it.
TEST_F(CmProtocolTest, DestroyedIdsDreqStopsAfterItsRetries) {
  Id* l = Listener();
  Id* c = Accepted(l);
  Inject(FromPeer(kAttrRtu, c));
  sent_.clear();
  ASSERT_EQ(rdma_destroy_id(&c->id), 0);  // connected: one DREQ now
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].msg.attr, kAttrDreq);
  for (int i = 0; i < Retries() + 5; ++i) AdvanceAndRunTimers(RetryMs());
  EXPECT_EQ(sent_.size(), size_t(1 + Retries()));
  for (const Sent& s : sent_) EXPECT_EQ(s.msg.attr, kAttrDreq);
  EXPECT_TRUE(G().lingering.empty());
}

// Every (state, MAD) pair the table has no row for leaves the id as it
// was: same state, same timer, no event, nothing sent (the handlers consult
// the table, there is no other path). Driven through HandleMad on an id put
// in each state in turn.
TEST_F(CmProtocolTest, MadsNotInTheTableChangeNothing) {
  const struct {
    uint16_t attr;
    CmEvent ev;
  } kMads[] = {{kAttrRep, CmEvent::kRepNoQp}, {kAttrRtu, CmEvent::kRtu}, {kAttrRej, CmEvent::kRej},
               {kAttrDrep, CmEvent::kDrep}};
  constexpr St kAll[] = {St::kIdle,      St::kAddrResolved, St::kRouteResolved, St::kListen,   St::kReqSent,
                         St::kRepRcvd,   St::kReqRcvd,      St::kRepSent,       St::kConnected, St::kDreqSent,
                         St::kDisconnected, St::kRejected,  St::kError};
  int checked = 0;
  for (const auto& mad : kMads) {
    for (St s : kAll) {
      if (FindTransition(s, mad.ev)) continue;
      Id* id = ActiveId();
      {
        std::lock_guard<std::mutex> l(G().mu);
        NewCommId(id);
        SetTimer(id, Timer::kReq, g_now + std::chrono::seconds(1));  // a timer the MAD must not stop
      }
      id->remote_comm_id = kPeerComm;
      id->st = s;
      sent_.clear();
      const uint64_t unexpected = G().unexpected_events;
      CmMsg m = FromPeer(mad.attr, id);
      m.reason = kRejConsumer;
      Inject(m);
      EXPECT_EQ(id->st, s) << CmAttrName(mad.attr) << " in " << StName(s);
      EXPECT_EQ(id->timer, Timer::kReq) << CmAttrName(mad.attr) << " in " << StName(s);
      EXPECT_TRUE(sent_.empty()) << CmAttrName(mad.attr) << " in " << StName(s);
      EXPECT_EQ(NextEvent().type, -1) << CmAttrName(mad.attr) << " in " << StName(s);
      EXPECT_EQ(G().unexpected_events, unexpected + 1) << CmAttrName(mad.attr) << " in " << StName(s);
      {
        std::lock_guard<std::mutex> l(G().mu);
        StopTimer(id);
      }
      ASSERT_EQ(rdma_destroy_id(&id->id), 0);
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

// The same for the timers: a timeout an id's state has no row for is
// dropped (the timer is stopped, nothing else happens).
TEST_F(CmProtocolTest, TimeoutsNotInTheTableChangeNothing) {
  constexpr St kAll[] = {St::kIdle,      St::kAddrResolved, St::kRouteResolved, St::kListen,   St::kReqSent,
                         St::kRepRcvd,   St::kReqRcvd,      St::kRepSent,       St::kConnected, St::kDreqSent,
                         St::kDisconnected, St::kRejected,  St::kError};
  const struct {
    Timer timer;
    CmEvent ev;
  } kTimers[] = {{Timer::kReq, CmEvent::kReqTimeout}, {Timer::kRep, CmEvent::kRepTimeout},
                 {Timer::kDreq, CmEvent::kDreqTimeout}, {Timer::kTimeWait, CmEvent::kTimeWaitOver}};
  for (const auto& t : kTimers) {
    for (St s : kAll) {
      Id* id = ActiveId();
      id->st = s;
      id->retries_left = 0;
      {
        std::lock_guard<std::mutex> l(G().mu);
        SetTimer(id, t.timer, g_now);
      }
      AdvanceAndRunTimers(1);
      // Only a row into TimeWait starts a timer (TimeWait's own).
      const bool into_time_wait = s != St::kDisconnected && id->st == St::kDisconnected;
      EXPECT_EQ(id->timer, into_time_wait ? Timer::kTimeWait : Timer::kNone) << StName(s);
      if (FindTransition(s, t.ev)) {
        EXPECT_NE(NextEvent().type, -1) << StName(s);
      } else {
        EXPECT_EQ(id->st, s) << StName(s);
        EXPECT_EQ(NextEvent().type, -1) << StName(s);
      }
      ASSERT_EQ(rdma_destroy_id(&id->id), 0);
    }
  }
}

// Connection setup at scale (issue 17): the CM looks only at the timers
// that are due (Cm::timers, by deadline), and sleeps until the earliest.
TEST_F(CmProtocolTest, OnlyDueTimersRunAndTheNextDeadlineIsTheEarliest) {
  std::vector<Id*> early, late;
  for (int i = 0; i < 50; ++i) early.push_back(Connecting());
  g_now += std::chrono::milliseconds(RetryMs() / 2);
  for (int i = 0; i < 50; ++i) late.push_back(Connecting());
  EXPECT_EQ(G().timers.size(), 100u);
  {
    std::lock_guard<std::mutex> l(G().mu);
    EXPECT_EQ(NextCmDeadline(), early[0]->deadline);
  }
  sent_.clear();
  AdvanceAndRunTimers(RetryMs() - RetryMs() / 2);  // the early REQs are due, the late ones not
  ASSERT_EQ(sent_.size(), 50u);
  for (size_t i = 0; i < early.size(); ++i) {
    EXPECT_EQ(sent_[i].msg.attr, kAttrReq);
    EXPECT_EQ(early[i]->retries_left, Retries() - 1);
  }
  for (Id* id : late) EXPECT_EQ(id->retries_left, Retries());
  {
    std::lock_guard<std::mutex> l(G().mu);
    EXPECT_EQ(NextCmDeadline(), late[0]->deadline);
  }
  ASSERT_EQ(rdma_destroy_id(&late[0]->id), 0);
  EXPECT_EQ(G().timers.size(), 99u) << "a destroyed id leaves the timers";
}

// Unclaimed requests are indexed by arrival (Cm::unclaimed) until the
// application takes them or they are reclaimed.
TEST_F(CmProtocolTest, UnclaimedRequestsAreIndexedUntilTakenOrReclaimed) {
  Id* l = Listener();
  for (uint32_t i = 0; i < 5; ++i) {
    CmMsg m = Req();
    m.local_comm_id = kPeerComm + i;
    Inject(m);
  }
  EXPECT_EQ(G().unclaimed.size(), 5u);
  EXPECT_EQ(l->unclaimed_requests, 5);
  const Ev taken = NextEvent();
  ASSERT_EQ(taken.type, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(G().unclaimed.size(), 4u);
  EXPECT_EQ(l->unclaimed_requests, 4);
  {
    std::lock_guard<std::mutex> lock(G().mu);
    g_now += std::chrono::milliseconds(RetryMs() / 2);
    ReclaimUnclaimedRequests();  // too early
    EXPECT_EQ(G().unclaimed.size(), 4u);
    g_now += 2 * std::chrono::milliseconds(RetryMs()) * (Retries() + 1);
    ReclaimUnclaimedRequests();
  }
  EXPECT_TRUE(G().unclaimed.empty());
  EXPECT_EQ(l->unclaimed_requests, 0);
  EXPECT_EQ(G().ids.size(), 2u) << "the listener and the request it took";
  EXPECT_EQ(NextEvent().type, -1) << "the reclaimed requests' events went with them";
}

// Ports are found through Cm::ports: a port an idle or listening id holds
// on the wildcard is EADDRNOTAVAIL to a second wildcard bind (the kernel's
// cma_check_port) until that id is destroyed; ephemeral ports are distinct.
TEST_F(CmProtocolTest, BoundPortsAreIndexed) {
  rdma_cm_id *a = nullptr, *b = nullptr, *e1 = nullptr, *e2 = nullptr;
  ASSERT_EQ(rdma_create_id(&chan_->ch, &a, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(&chan_->ch, &b, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(47001);
  ASSERT_EQ(rdma_bind_addr(a, reinterpret_cast<sockaddr*>(&s)), 0);
  EXPECT_EQ(rdma_bind_addr(b, reinterpret_cast<sockaddr*>(&s)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  ASSERT_EQ(rdma_destroy_id(a), 0);
  EXPECT_EQ(rdma_bind_addr(b, reinterpret_cast<sockaddr*>(&s)), 0) << "the port is free again";
  ASSERT_EQ(rdma_create_id(&chan_->ch, &e1, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(&chan_->ch, &e2, nullptr, RDMA_PS_TCP), 0);
  s.sin_port = 0;
  ASSERT_EQ(rdma_bind_addr(e1, reinterpret_cast<sockaddr*>(&s)), 0);
  ASSERT_EQ(rdma_bind_addr(e2, reinterpret_cast<sockaddr*>(&s)), 0);
  const uint16_t p1 = SockPort(rdma_get_local_addr(e1)), p2 = SockPort(rdma_get_local_addr(e2));
  EXPECT_NE(p1, 0);
  EXPECT_NE(p1, p2);
  EXPECT_NE(p1, 47001);
  EXPECT_EQ(G().ports.size(), 3u);
  ASSERT_EQ(G().ports.count(ListenKey(RDMA_PS_TCP, p1)), 1u);
  EXPECT_EQ(G().ports[ListenKey(RDMA_PS_TCP, p1)].count(ToId(e1)), 1u);
}

// The kernel's port rules by family (cma_check_port, rdma_set_option(3)),
// as tgt's iSER portal needs them: 0.0.0.0:p and [::]:p bind together when
// the IPv6 id is AFONLY and not otherwise; each listener then gets the REQs
// of its own family. REUSEADDR lets two idle ids share a port, and the one
// that listens must then have it alone. Option errors are EINVAL.
TEST_F(CmProtocolTest, PortsFollowTheKernelsFamilyRules) {
  ibv_gid local6{}, peer6{};
  inet_pton(AF_INET6, "fd77:243::1", local6.raw);
  inet_pton(AF_INET6, "fd77:243::2", peer6.raw);
  G().gid_ip = {0, kLocalIp, 0};
  G().gid6 = {ibv_gid{}, ibv_gid{}, local6};
  rdma_cm_id *v4 = nullptr, *v6_dual = nullptr, *v6 = nullptr;
  ASSERT_EQ(rdma_create_id(&chan_->ch, &v4, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(&chan_->ch, &v6_dual, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(&chan_->ch, &v6, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in any4{};
  any4.sin_family = AF_INET;
  any4.sin_port = htons(kListenPort);
  sockaddr_in6 any6{};
  any6.sin6_family = AF_INET6;
  any6.sin6_port = htons(kListenPort);
  int off = 0, on = 1;
  EXPECT_EQ(rdma_set_option(v6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, 1), -1);
  EXPECT_EQ(errno, EINVAL) << "an int, not a byte";
  ASSERT_EQ(rdma_set_option(v6_dual, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &off, sizeof off), 0);
  ASSERT_EQ(rdma_set_option(v6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof on), 0);
  ASSERT_EQ(rdma_bind_addr(v4, reinterpret_cast<sockaddr*>(&any4)), 0);
  EXPECT_EQ(rdma_bind_addr(v6_dual, reinterpret_cast<sockaddr*>(&any6)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL) << "a dual-stack [::] overlaps 0.0.0.0";
  ASSERT_EQ(rdma_bind_addr(v6, reinterpret_cast<sockaddr*>(&any6)), 0) << "AFONLY: no overlap";
  ASSERT_EQ(rdma_listen(v4, 4), 0);
  ASSERT_EQ(rdma_listen(v6, 4), 0);
  EXPECT_EQ(rdma_set_option(v6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &off, sizeof off), -1);
  EXPECT_EQ(errno, EINVAL) << "AFONLY once listening";

  // The application takes each request (NextEvent), as TearDown expects:
  // a listener's unclaimed requests go with it.
  Inject(Req());
  const Ev first = NextEvent();
  ASSERT_EQ(first.type, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(first.listen_id, v4) << "an IPv4 REQ goes to the IPv4 listener";
  CmMsg req = Req();
  req.local_comm_id = kPeerComm + 1;
  CmaHdr h;
  h.ipv6 = true;
  std::memcpy(h.src6, peer6.raw, 16);
  std::memcpy(h.dst6, local6.raw, 16);
  h.src_port = htons(41000);
  EncodeCmaHdr(req.pdata, h);
  Inject6(req, peer6, local6);
  const Ev second = NextEvent();
  ASSERT_EQ(second.type, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_EQ(second.listen_id, v6) << "an IPv6 REQ goes to the IPv6 listener";

  // REUSEADDR on both idle ids: they share a port until one listens.
  rdma_cm_id *r1 = nullptr, *r2 = nullptr;
  ASSERT_EQ(rdma_create_id(&chan_->ch, &r1, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(&chan_->ch, &r2, nullptr, RDMA_PS_TCP), 0);
  any4.sin_port = htons(kListenPort + 1);
  for (rdma_cm_id* r : {r1, r2}) {
    ASSERT_EQ(rdma_set_option(r, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on), 0);
    ASSERT_EQ(rdma_bind_addr(r, reinterpret_cast<sockaddr*>(&any4)), 0);
  }
  EXPECT_EQ(rdma_listen(r2, 4), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL) << "a listener must have its port alone";
  ASSERT_EQ(rdma_destroy_id(r1), 0);
  EXPECT_EQ(rdma_listen(r2, 4), 0);
  EXPECT_EQ(rdma_set_option(r2, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on), -1);
  EXPECT_EQ(errno, EINVAL) << "REUSEADDR on a listener";
}

TEST(CmTransitionTableTest, RowsFollowTheSpec) {
  // The handshake (12.9): each message moves the state one step.
  EXPECT_EQ(FindTransition(St::kRouteResolved, CmEvent::kConnect)->next, St::kReqSent);
  EXPECT_EQ(FindTransition(St::kReqSent, CmEvent::kRep)->next, St::kConnected);
  EXPECT_EQ(FindTransition(St::kReqRcvd, CmEvent::kAccept)->next, St::kRepSent);
  EXPECT_EQ(FindTransition(St::kRepSent, CmEvent::kRtu)->next, St::kConnected);
  EXPECT_EQ(FindTransition(St::kDreqSent, CmEvent::kDrep)->next, St::kDisconnected);
  // A message the state does not wait for has no row.
  EXPECT_EQ(FindTransition(St::kConnected, CmEvent::kRtu), nullptr);
  EXPECT_EQ(FindTransition(St::kReqSent, CmEvent::kRtu), nullptr);
  EXPECT_EQ(FindTransition(St::kConnected, CmEvent::kDrep), nullptr);
  EXPECT_EQ(FindTransition(St::kListen, CmEvent::kAccept), nullptr);
  // Every row: a citation. Every MAD or timeout that leaves a waiting state
  // with an event stops the state's timer.
  for (int s = 0; s < kStates; ++s) {
    for (int e = 0; e < kCmEvents; ++e) {
      const CmTransition* t = FindTransition(St(s), CmEvent(e));
      if (!t) continue;
      EXPECT_NE(t->spec[0], '\0') << StName(St(s)) << " / " << CmEventName(CmEvent(e)) << ": no citation";
      const bool waiting = St(s) == St::kReqSent || St(s) == St::kRepSent || St(s) == St::kDreqSent;
      const bool from_peer_or_timer = e >= int(CmEvent::kReq);
      if (waiting && from_peer_or_timer && t->next != St(s) && t->deliver != kNoEvent) {
        EXPECT_TRUE(t->stop_timer) << StName(St(s)) << " / " << CmEventName(CmEvent(e));
      }
    }
  }
}

// docs/rdmacm.md prints the table as the code has it.
TEST(CmTransitionTableTest, DocsShowTheTable) {
  std::ifstream f(SOFTRNIC_SOURCE_DIR "/docs/rdmacm.md");
  ASSERT_TRUE(f.good());
  std::stringstream doc;
  doc << f.rdbuf();
  EXPECT_NE(doc.str().find(DumpTransitionTable()), std::string::npos)
      << "docs/rdmacm.md is out of date; the table is:\n"
      << DumpTransitionTable();
}

}  // namespace
}  // namespace softrnic::rdmacm
