// rdma_resolve_addr (src/rdmacm/cma_address.cc) with IPv4 and IPv6
// addresses through its one path, against a CM with no device: the GID
// table is set by the test (10.0.0.1 at index 1, fd77:238::1 at index 2, no
// per-process loopback GID). What each case expects is what
// rdma_resolve_addr(3) and rdma_get_cm_event(3) name: the call returns -1
// with errno when it fails itself (a source that cannot be bound, "the same
// as if rdma_bind_addr were called"), and otherwise the outcome is an event,
// RDMA_CM_EVENT_ADDR_RESOLVED or RDMA_CM_EVENT_ADDR_ERROR with the negative
// errno as its status; a synchronous id (no channel) returns that errno.
// The unreachable destination (no route: -ENETUNREACH) needs a routing
// table of its own: tests/integration/rdmacm/test_resolve_errors.sh.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rdmacm/cm_internal.h"

namespace softrnic::rdmacm {
namespace {

constexpr uint32_t kLocalIp = 0x0a000001;  // 10.0.0.1: GID 1
constexpr char kLocal6[] = "fd77:238::1";  // GID 2
constexpr int kLocal6Index = 2;
constexpr uint16_t kPort = 9;

int DropMad(int, const ibv_gid&, const uint8_t*) { return 0; }

// A socket address of either family from its text.
sockaddr_storage Addr(const std::string& ip, uint16_t port = kPort) {
  sockaddr_storage ss{};
  if (ip.find(':') != std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr), 1) << ip;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET, ip.c_str(), &a->sin_addr), 1) << ip;
  }
  return ss;
}
sockaddr* Sa(sockaddr_storage& ss) { return reinterpret_cast<sockaddr*>(&ss); }

// The text of an id's source address (either family).
std::string SrcIp(const Id* id) {
  char b[INET6_ADDRSTRLEN] = {};
  const rdma_addr& a = id->id.route.addr;
  if (a.src_addr.sa_family == AF_INET6)
    inet_ntop(AF_INET6, &a.src_sin6.sin6_addr, b, sizeof b);
  else
    inet_ntop(AF_INET, &a.src_sin.sin_addr, b, sizeof b);
  return b;
}

class ResolveAddrTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ResetCmForTest();
    Cm& g = G();
    g.started = true;  // no device: ids get none
    g.send_mad = &DropMad;
    g.gid_ip = {0, kLocalIp, 0};
    g.gid6.assign(3, ibv_gid{});
    ASSERT_EQ(inet_pton(AF_INET6, kLocal6, g.gid6[kLocal6Index].raw), 1);
    g.loop_idx = -1;
    chan_ = NewChannel();
    ASSERT_NE(chan_, nullptr);
    fcntl(chan_->ch.fd, F_SETFL, O_NONBLOCK);
  }
  void TearDown() override {
    std::vector<Id*> ids(G().ids.begin(), G().ids.end());
    for (Id* id : ids) rdma_destroy_id(&id->id);
    FreeChannel(chan_);
  }

  Id* NewId(bool sync = false) {
    rdma_cm_id* cid = nullptr;
    EXPECT_EQ(rdma_create_id(sync ? nullptr : &chan_->ch, &cid, nullptr, RDMA_PS_TCP), 0);
    return cid ? ToId(cid) : nullptr;
  }

  // The next event on chan_ (acked): {type, status}; {-1, 0} if none.
  std::pair<int, int> NextEvent() {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(&chan_->ch, &e) != 0) {
      EXPECT_EQ(errno, EAGAIN);
      return {-1, 0};
    }
    std::pair<int, int> out{e->event, e->status};
    rdma_ack_cm_event(e);
    return out;
  }

  Channel* chan_ = nullptr;
};

using Ev = std::pair<int, int>;

TEST_F(ResolveAddrTest, DestinationsThatNameNoHostGiveAddrErrorEaddrnotavail) {
  // The wildcards, IPv4 broadcast, an IPv6 group (not joined here) and an
  // IPv4-mapped IPv6 address; ::1 too, since the device has no IPv6
  // loopback GID to send from.
  for (const char* dst : {"0.0.0.0", "255.255.255.255", "::", "ff02::1", "::ffff:10.0.0.2", "::1"}) {
    SCOPED_TRACE(dst);
    Id* id = NewId();
    sockaddr_storage d = Addr(dst);
    ASSERT_EQ(rdma_resolve_addr(&id->id, nullptr, Sa(d), 2000), 0);
    EXPECT_EQ(NextEvent(), Ev(RDMA_CM_EVENT_ADDR_ERROR, -EADDRNOTAVAIL));
    EXPECT_EQ(id->st, St::kIdle);
    EXPECT_FALSE(id->bound);
    EXPECT_EQ(NextEvent().first, -1);
  }
}

TEST_F(ResolveAddrTest, ASourceOfTheOtherFamilyIsNotBoundBeforeAnIpv4Destination) {
  Id* id = NewId();
  sockaddr_storage s = Addr("2001:db8::1", 0), d = Addr("10.0.0.1");
  ASSERT_EQ(rdma_resolve_addr(&id->id, Sa(s), Sa(d), 2000), 0);  // ignored, as before the merge
  EXPECT_EQ(NextEvent(), Ev(RDMA_CM_EVENT_ADDR_RESOLVED, 0));
  EXPECT_EQ(id->id.route.addr.src_addr.sa_family, AF_INET);
}

// The same cases for each family: its wildcard, a local address and its
// GID index (IPv4 without a loopback GID goes from GID 0, IPv6 from its
// own GID), and a documentation address (RFC 5737, RFC 3849) that no host
// has.
struct Family {
  const char* name;
  const char* any;
  const char* local;
  int local_index;
  const char* foreign;
};
class ResolveAddrFamilyTest : public ResolveAddrTest, public ::testing::WithParamInterface<Family> {};
INSTANTIATE_TEST_SUITE_P(Families, ResolveAddrFamilyTest,
                         ::testing::Values(Family{"Ipv4", "0.0.0.0", "10.0.0.1", 0, "192.0.2.1"},
                                           Family{"Ipv6", "::", kLocal6, kLocal6Index, "2001:db8::1"}),
                         [](const ::testing::TestParamInfo<Family>& p) { return std::string(p.param.name); });

TEST_P(ResolveAddrFamilyTest, ASynchronousIdReturnsTheAddrErrorsErrno) {
  Id* id = NewId(/*sync=*/true);
  sockaddr_storage d = Addr(GetParam().any);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(&id->id, nullptr, Sa(d), 2000), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  ASSERT_NE(id->id.event, nullptr);
  EXPECT_EQ(id->id.event->event, RDMA_CM_EVENT_ADDR_ERROR);
}

TEST_P(ResolveAddrFamilyTest, ASourceNotOnThisHostFailsTheCallWithoutAnEvent) {
  Id* id = NewId();
  sockaddr_storage s = Addr(GetParam().foreign, 0), d = Addr(GetParam().local);
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(&id->id, Sa(s), Sa(d), 2000), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  EXPECT_EQ(NextEvent().first, -1);
  EXPECT_EQ(id->st, St::kIdle);
  EXPECT_FALSE(id->bound);
}

TEST_P(ResolveAddrFamilyTest, ALocalDestinationIsReachedFromItselfOnAnEphemeralPort) {
  Id* id = NewId();
  sockaddr_storage d = Addr(GetParam().local);
  ASSERT_EQ(rdma_resolve_addr(&id->id, nullptr, Sa(d), 2000), 0);
  EXPECT_EQ(NextEvent(), Ev(RDMA_CM_EVENT_ADDR_RESOLVED, 0));
  EXPECT_EQ(id->st, St::kAddrResolved);
  EXPECT_TRUE(id->local_dst);
  EXPECT_TRUE(id->bound);
  EXPECT_EQ(id->id.route.addr.src_addr.sa_family, d.ss_family);
  EXPECT_EQ(SrcIp(id), GetParam().local);
  EXPECT_GE(SinPort(id->id.route.addr.src_sin), 32768);  // sin6_port: same offset
  EXPECT_EQ(id->sgid_index, GetParam().local_index);
  const ibv_gid sgid = LocalGid(GetParam().local_index);
  EXPECT_EQ(std::memcmp(id->id.route.addr.addr.ibaddr.sgid.raw, sgid.raw, 16), 0);
  const size_t len = d.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  EXPECT_EQ(std::memcmp(&id->id.route.addr.dst_storage, &d, len), 0);
}

TEST_P(ResolveAddrFamilyTest, AWildcardBoundIdTakesTheResolvedSourceAndKeepsItsPort) {
  Id* id = NewId();
  sockaddr_storage b = Addr(GetParam().any, 0), d = Addr(GetParam().local);
  ASSERT_EQ(rdma_bind_addr(&id->id, Sa(b)), 0);
  const uint16_t port = SinPort(id->id.route.addr.src_sin);
  ASSERT_NE(port, 0);
  ASSERT_EQ(rdma_resolve_addr(&id->id, nullptr, Sa(d), 2000), 0);
  EXPECT_EQ(NextEvent(), Ev(RDMA_CM_EVENT_ADDR_RESOLVED, 0));
  EXPECT_EQ(SrcIp(id), GetParam().local);
  EXPECT_EQ(SinPort(id->id.route.addr.src_sin), port);
}

TEST_F(ResolveAddrTest, OtherFamiliesAreEafnosupport) {
  Id* id = NewId();
  sockaddr_storage d{};
  d.ss_family = AF_UNIX;
  errno = 0;
  EXPECT_EQ(rdma_resolve_addr(&id->id, nullptr, Sa(d), 2000), -1);
  EXPECT_EQ(errno, EAFNOSUPPORT);
  EXPECT_EQ(NextEvent().first, -1);
}

}  // namespace
}  // namespace softrnic::rdmacm
