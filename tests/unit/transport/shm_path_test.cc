// Why a destination is or is not reached through shared memory
// (shm_path.h), as the transport decides it and `softrnic devinfo --peer`
// reports it: the factory's choice (ChooseTransport), each step of the
// lookup (ShmLookup's verdict), the link listing, and
// ShmTransport::ExplainPath, which must decide like PeerFor without taking
// any of the peer's rings.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "transport/factory.h"
#include "transport/shm_path.h"
#include "transport/shm_registry.h"
#include "transport/shm_segment.h"
#include "transport/shm_transport.h"
#include "transport/udp_transport.h"
#include "shm_test_transports.h"

namespace softrnic::transport {
namespace {

uint32_t Ip(const std::string& text) {
  in_addr a{};
  inet_pton(AF_INET, text.c_str(), &a);
  return a.s_addr;
}

TEST(ChooseTransport, TheSettingThatDecidesIsNamed) {
  TransportChoice c = ChooseTransport(TransportMode::kAuto, false);
  EXPECT_TRUE(c.shared_memory);
  EXPECT_FALSE(c.faults);
  EXPECT_NE(std::string(c.reason).find("SOFTRNIC_TRANSPORT=auto"), std::string::npos);
  c = ChooseTransport(TransportMode::kShm, false);
  EXPECT_TRUE(c.shared_memory);
  EXPECT_NE(std::string(c.reason).find("SOFTRNIC_TRANSPORT=shm"), std::string::npos);
  c = ChooseTransport(TransportMode::kUdp, false);
  EXPECT_FALSE(c.shared_memory);
  EXPECT_NE(std::string(c.reason).find("SOFTRNIC_TRANSPORT=udp"), std::string::npos);
  // Faults win over every mode: fault injection acts on UDP.
  for (TransportMode m : {TransportMode::kAuto, TransportMode::kShm, TransportMode::kUdp}) {
    c = ChooseTransport(m, true);
    EXPECT_FALSE(c.shared_memory);
    EXPECT_TRUE(c.faults);
    EXPECT_NE(std::string(c.reason).find("SOFTRNIC_FAULTS"), std::string::npos);
  }
  EXPECT_STREQ(TransportModeName(TransportMode::kUdp), "udp");
  EXPECT_STREQ(TransportModeName(TransportMode::kAuto), "auto");
  EXPECT_STREQ(TransportModeName(TransportMode::kShm), "shm");
}

TEST(ShmPathStep, EveryStepHasANameAndAText) {
  for (int s = 0; s <= static_cast<int>(ShmPathStep::kNoFreeRing); ++s) {
    const auto step = static_cast<ShmPathStep>(s);
    EXPECT_STRNE(ShmPathStepName(step), "unknown") << s;
    EXPECT_STRNE(ShmPathStepText(step), "unknown") << s;
  }
}

TEST(ShmLookupVerdict, EachFailureSaysWhichStep) {
  ShmSegment seg;
  std::string error;
  ASSERT_TRUE(seg.Create(&error)) << error;
  const uint64_t ns = NetnsInode();
  const uint32_t ip = Ip(TestIp(0));
  const uint16_t port = 7100;

  // Published: found, with its owner and link; listed with our pid.
  const std::string path = ShmPublish(ns, ip, port, seg.fd());
  ASSERT_FALSE(path.empty());
  uint32_t pid = 0;
  ShmPathVerdict v;
  const int fd = ShmLookup(ns, ip, port, &pid, &v);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(v.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(v.link, path);
  const auto links = ShmListLinks();
  EXPECT_TRUE(std::any_of(links.begin(), links.end(), [&](const ShmLinkEntry& l) {
    return l.netns == ns && l.ip == ip && l.port == port && l.pid == static_cast<uint32_t>(getpid());
  }));
  // The same endpoint in another network namespace is another key: not
  // published there, but listed (devinfo names the namespace that has it).
  v = ShmPathVerdict{};
  EXPECT_LT(ShmLookup(ns + 1, ip, port, &pid, &v), 0);
  EXPECT_EQ(v.step, ShmPathStep::kNotPublished);
  ShmUnpublish(path, seg.fd());
  v = ShmPathVerdict{};
  EXPECT_LT(ShmLookup(ns, ip, port, &pid, &v), 0);
  EXPECT_EQ(v.step, ShmPathStep::kNotPublished);

  // A link of a process that is gone: the owner is named, the step says stale.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const std::string stale = ShmEndpointPath(ns, ip, port);
  ASSERT_EQ(symlink(("/proc/" + std::to_string(child) + "/fd/3").c_str(), stale.c_str()), 0);
  v = ShmPathVerdict{};
  EXPECT_LT(ShmLookup(ns, ip, port, &pid, &v), 0);
  EXPECT_EQ(v.step, ShmPathStep::kOwnerGone);
  EXPECT_EQ(v.pid, static_cast<uint32_t>(child));
  unlink(stale.c_str());

  // A link to anything but a process's descriptor.
  ASSERT_EQ(symlink("/etc/passwd", stale.c_str()), 0);
  v = ShmPathVerdict{};
  EXPECT_LT(ShmLookup(ns, ip, port, &pid, &v), 0);
  EXPECT_EQ(v.step, ShmPathStep::kBadLink);
  unlink(stale.c_str());
}

TEST(ShmExplainPath, DecidesLikePeerForWithoutTakingARing) {
  auto a = MakeShm(1);
  auto b = MakeShm(2);
  ASSERT_TRUE(a && b);
  const Endpoint to_b = b->locals()[0];
  // More explanations than the peer has rings: a ring taken by each would
  // leave none after the kShmRings-th.
  for (uint32_t i = 0; i < 2 * kShmRings; ++i) {
    const ShmPathVerdict v = a->ExplainPath(to_b);
    ASSERT_EQ(v.step, ShmPathStep::kShared) << i << ": " << ShmPathStepName(v.step) << " " << v.detail;
    EXPECT_EQ(v.pid, static_cast<uint32_t>(getpid()));
  }
  EXPECT_FALSE(b->Active());  // no sender holds a ring of b
  // And PeerFor, which does take one, agrees.
  ASSERT_NE(a->PeerFor(to_b, 0), nullptr);
  EXPECT_TRUE(b->Active());
  EXPECT_EQ(a->ExplainPath(to_b).step, ShmPathStep::kShared);

  // The device's own endpoint, an unpublished one, an IPv6 GID.
  EXPECT_EQ(a->ExplainPath(a->locals()[0]).step, ShmPathStep::kOwnDevice);
  EXPECT_EQ(a->ExplainPath(Endpoint{Gid::FromIpv4(Ip(TestIp(3))), TestPort()}).step,
            ShmPathStep::kNotPublished);
  Endpoint v6;
  v6.gid.raw[0] = 0xfd;
  v6.gid.raw[15] = 2;
  EXPECT_EQ(a->ExplainPath(v6).step, ShmPathStep::kNotIpv4);
}

TEST(ShmExplainPath, APeerWithEveryRingTakenHasNoFreeRing) {
  auto target = MakeShm(4);
  ASSERT_TRUE(target);
  const Endpoint to_target = target->locals()[0];
  // kShmRings live senders (this process, each with a sender id of its
  // own), on one address with ports of their own.
  std::vector<std::unique_ptr<ShmTransport>> senders;
  for (uint32_t i = 0; i < kShmRings; ++i) {
    senders.push_back(MakeShm(10, static_cast<uint16_t>(1 + i)));
    ASSERT_TRUE(senders.back());
    ASSERT_NE(senders.back()->PeerFor(to_target, 0), nullptr) << i;
  }
  auto late = MakeShm(11);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->ExplainPath(to_target).step, ShmPathStep::kNoFreeRing);
  EXPECT_EQ(late->PeerFor(to_target, 0), nullptr);  // and the transport agrees: UDP
  senders.pop_back();  // its ring is released
  EXPECT_EQ(late->ExplainPath(to_target).step, ShmPathStep::kShared);
}

}  // namespace
}  // namespace softrnic::transport
