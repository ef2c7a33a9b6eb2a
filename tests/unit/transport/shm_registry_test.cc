// Discovery (shm_registry.h) and the shared-memory transport end to end:
// publish / look up / validate, stale and forged links, pid checks, packets
// through a ring, and the doorbell that wakes a sleeping target.
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transport/shm_registry.h"
#include "transport/shm_segment.h"
#include "transport/factory.h"
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


// The pid of a process that has exited (a child that did nothing), -1 on
// failure.
pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child ? child : -1;
}

// A crashed owner's link at `path`: /proc/<dead>/fd/3, replacing whatever
// was there.
bool PlantStaleLink(const std::string& path, pid_t dead) {
  unlink(path.c_str());
  return symlink(("/proc/" + std::to_string(dead) + "/fd/3").c_str(), path.c_str()) == 0;
}

TEST(ShmRegistry, PublishLookupAttachUnpublish) {
  ShmSegment seg;
  std::string error;
  ASSERT_TRUE(seg.Create(&error)) << error;
  const uint64_t ns = NetnsInode();
  const uint32_t ip = Ip(TestIp(40));
  const std::string path = ShmPublish(ns, ip, 7000, seg.fd());
  ASSERT_FALSE(path.empty());
  uint32_t pid = 0;
  const int fd = ShmLookup(ns, ip, 7000, &pid);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(pid, static_cast<uint32_t>(getpid()));
  ShmSegment peer;
  ASSERT_TRUE(peer.Attach(fd, pid, &error)) << error;
  EXPECT_EQ(peer.header()->nonce, seg.header()->nonce);
  // The same memory: a store through one mapping is seen through the other.
  seg.header()->sleeping.store(7);
  EXPECT_EQ(peer.header()->sleeping.load(), 7u);
  ShmUnpublish(path, seg.fd());
  EXPECT_LT(ShmLookup(ns, ip, 7000, &pid), 0);
}

TEST(ShmRegistry, WrongPidIsRejected) {
  ShmSegment seg;
  std::string error;
  ASSERT_TRUE(seg.Create(&error));
  const uint32_t ip = Ip(TestIp(41));
  const std::string path = ShmPublish(NetnsInode(), ip, 7001, seg.fd());
  uint32_t pid = 0;
  const int fd = ShmLookup(NetnsInode(), ip, 7001, &pid);
  ASSERT_GE(fd, 0);
  ShmSegment peer;
  // As if the pid had been reused: the header names another process.
  EXPECT_FALSE(peer.Attach(fd, pid + 1, &error));
  ShmUnpublish(path, seg.fd());
}

TEST(ShmRegistry, StaleLinkOfADeadProcessIsIgnoredAndReplaced) {
  const uint32_t ip = Ip(TestIp(42));
  const std::string path = ShmEndpointPath(NetnsInode(), ip, 7002);
  const pid_t child = DeadPid();
  ASSERT_GT(child, 0);
  ASSERT_TRUE(PlantStaleLink(path, child));
  uint32_t pid = 0;
  EXPECT_LT(ShmLookup(NetnsInode(), ip, 7002, &pid), 0);
  // The sweep at device creation removes it.
  ShmSweepStaleLinks();
  struct stat st{};
  EXPECT_NE(lstat(path.c_str(), &st), 0);
  // A new owner of the endpoint (re)places it.
  ASSERT_TRUE(PlantStaleLink(path, child));
  ShmSegment seg;
  std::string error;
  ASSERT_TRUE(seg.Create(&error));
  ASSERT_EQ(ShmPublish(NetnsInode(), ip, 7002, seg.fd()), path);
  const int fd = ShmLookup(NetnsInode(), ip, 7002, &pid);
  ASSERT_GE(fd, 0);
  ShmSegment peer;
  EXPECT_TRUE(peer.Attach(fd, pid, &error)) << error;
  ShmUnpublish(path, seg.fd());
}

// A new process whose pid is a dead owner's publishes under the dead owner's
// name (the address comes from the pid) while another process's sweep has
// judged the old link stale: the sweep must not remove the fresh link (it
// did, by name, and the new process stayed unreachable through shared
// memory: bench/scale/shm_all_to_all with 128 processes).
TEST(ShmRegistry, SweepKeepsALinkPublishedAfterItJudgedTheOldOneStale) {
  const uint32_t ip = Ip(TestIp(45));
  const std::string path = ShmEndpointPath(NetnsInode(), ip, 7005);
  const std::string name = path.substr(path.rfind('/') + 1);
  const pid_t child = DeadPid();
  ASSERT_GT(child, 0);
  ASSERT_TRUE(PlantStaleLink(path, child));
  ShmSegment seg;
  std::string error;
  ASSERT_TRUE(seg.Create(&error)) << error;
  bool published = false;
  ShmSweepStaleLinks(/*dry_run=*/false, [&](const char* swept) {
    if (name != swept || published) return;
    published = true;
    EXPECT_EQ(ShmPublish(NetnsInode(), ip, 7005, seg.fd()), path);
  });
  ASSERT_TRUE(published);
  uint32_t pid = 0;
  const int fd = ShmLookup(NetnsInode(), ip, 7005, &pid);
  ASSERT_GE(fd, 0) << "the fresh link was removed";
  EXPECT_EQ(pid, static_cast<uint32_t>(getpid()));
  ShmSegment peer;
  EXPECT_TRUE(peer.Attach(fd, pid, &error)) << error;
  // And a link that stays stale is still removed.
  ShmUnpublish(path, seg.fd());
  ASSERT_TRUE(PlantStaleLink(path, child));
  ShmSweepStaleLinks();
  struct stat st{};
  EXPECT_NE(lstat(path.c_str(), &st), 0);
}

TEST(ShmRegistry, ForgedLinksAreRejected) {
  const uint32_t ip = Ip(TestIp(43));
  const std::string path = ShmEndpointPath(NetnsInode(), ip, 7003);
  uint32_t pid = 0;
  // Not of the /proc/<pid>/fd/<n> form.
  unlink(path.c_str());
  ASSERT_EQ(symlink("/etc/passwd", path.c_str()), 0);
  EXPECT_LT(ShmLookup(NetnsInode(), ip, 7003, &pid), 0);
  // Our own fd, but not a softrnic segment (an unsealed memfd of the right size).
  const int other = memfd_create("not-a-segment", MFD_CLOEXEC);
  ASSERT_GE(other, 0);
  ASSERT_EQ(ftruncate(other, static_cast<off_t>(kShmSegmentSize)), 0);
  unlink(path.c_str());
  ASSERT_EQ(symlink(("/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(other)).c_str(),
                    path.c_str()),
            0);
  const int fd = ShmLookup(NetnsInode(), ip, 7003, &pid);
  ASSERT_GE(fd, 0);
  ShmSegment peer;
  std::string error;
  EXPECT_FALSE(peer.Attach(fd, pid, &error));
  unlink(path.c_str());
  close(other);
}

TEST(ShmTransport, PacketsGoThroughTheRingAndTheDoorbellWakesASleeper) {
  auto a = MakeShm(44);
  auto b = MakeShm(45);
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> pkt(100);
  for (size_t i = 0; i < pkt.size(); ++i) pkt[i] = static_cast<uint8_t>(i);
  TxPacket tx;
  tx.data = pkt.data();
  tx.length = 100;
  tx.local_index = 0;
  tx.dst = b->locals()[0];
  ASSERT_EQ(a->SendBurst(&tx, 1), 1);
  EXPECT_EQ(a->counters().shm_tx_packets, 1u);
  EXPECT_EQ(a->counters().shm_tx_bytes, 100u);
  EXPECT_EQ(a->counters().tx_packets, 0u);  // nothing on the wire
  RxPacket rx[8];
  ASSERT_EQ(b->RecvBurst(rx, 8), 1);
  EXPECT_EQ(rx[0].length, 100u);
  EXPECT_EQ(std::memcmp(rx[0].data, pkt.data(), 100), 0);
  EXPECT_EQ(rx[0].src, a->locals()[0]);
  EXPECT_EQ(rx[0].local_index, 0);

  // b's progress thread goes to sleep: a's next send rings the doorbell once.
  ASSERT_TRUE(b->PrepareToSleep());
  ASSERT_EQ(a->SendBurst(&tx, 1), 1);
  ASSERT_EQ(a->SendBurst(&tx, 1), 1);
  EXPECT_EQ(a->counters().doorbells_sent, 1u);
  // The doorbell is a datagram on b's UDP socket (what epoll waits on); it is
  // recognised, not counted as a runt, and the ring's packets come through.
  b->WokeUp();
  usleep(20000);
  int got = 0;
  for (int i = 0; i < 10 && got < 2; ++i) got += b->RecvBurst(rx, 8);
  EXPECT_EQ(got, 2);
  for (int i = 0; i < 5; ++i) (void)b->RecvBurst(rx, 8);
  EXPECT_EQ(b->counters().rx_doorbells, 1u);
  EXPECT_EQ(b->counters().rx_runts, 0u);
  // Work pending: PrepareToSleep says "don't".
  ASSERT_EQ(a->SendBurst(&tx, 1), 1);
  EXPECT_FALSE(b->PrepareToSleep());
}

// Quiet packets (Transport::SetQuiet: an ACK sent when the application
// polls the completion it acknowledges, engine/roles/ack_delay.cc) are published
// in the ring, where the peer's next pass finds them, but ring no doorbell;
// WakePeer rings it, once, and only for a sleeper.
TEST(ShmTransport, QuietPacketsRingNoDoorbellUntilWakePeer) {
  auto a = MakeShm(48);
  auto b = MakeShm(49);
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> pkt(100, 7);
  TxPacket tx;
  tx.data = pkt.data();
  tx.length = 100;
  tx.local_index = 0;
  tx.dst = b->locals()[0];
  ASSERT_EQ(a->SendBurst(&tx, 1), 1);  // the ring is set up
  RxPacket rx[8];
  ASSERT_EQ(b->RecvBurst(rx, 8), 1);
  ASSERT_TRUE(b->PrepareToSleep());
  a->SetQuiet(true);
  ASSERT_EQ(a->SendBurst(&tx, 1), 1);
  a->SetQuiet(false);
  EXPECT_EQ(a->counters().doorbells_sent, 0u);
  EXPECT_EQ(a->counters().shm_tx_packets, 2u);
  a->WakePeer(b->locals()[0], 0);
  a->WakePeer(b->locals()[0], 0);  // the sleeper's flag is down now
  EXPECT_EQ(a->counters().doorbells_sent, 1u);
  b->WokeUp();
  int got = 0;
  for (int i = 0; i < 10 && got < 1; ++i) got += b->RecvBurst(rx, 8);
  EXPECT_EQ(got, 1) << "the quiet packet was in the ring";
  // Not quiet any more: a sleeper's doorbell rings with the packet.
  ASSERT_TRUE(b->PrepareToSleep());
  ASSERT_EQ(a->SendBurst(&tx, 1), 1);
  EXPECT_EQ(a->counters().doorbells_sent, 2u);
  b->WokeUp();
  // Nobody sleeps: WakePeer rings nothing.
  a->WakePeer(b->locals()[0], 0);
  EXPECT_EQ(a->counters().doorbells_sent, 2u);
}

// Two sleepers of one process (the progress thread and an application
// thread blocked for a completion event): the last one out takes the
// `sleeping` flag down. If the other announced its sleep (flag up, rings
// re-checked) just before that store, a sender in between saw no sleeper
// and rang nothing, and its packet waited for the sleeper's timeout (up to
// 5 ms: a p99.9 cause, docs/benchmarks.md). The waking thread now puts the
// flag back up and rings the sleeper's doorbell itself.
TEST(ShmTransport, ASleeperThatArrivesWhileTheLastOneWakesIsWoken) {
  auto b = MakeShm(47);
  ASSERT_TRUE(b);
  RxPacket rx[8];
  ASSERT_TRUE(b->PrepareToSleep());  // A sleeps
  const bool last = b->CountOffSleeper();  // A wakes: count off...
  ASSERT_TRUE(last);
  ASSERT_TRUE(b->PrepareToSleep());  // ...B announces its sleep here...
  b->FinishWake(last);               // ...and A takes the flag down
  EXPECT_EQ(b->sleepers(), 1);
  EXPECT_EQ(b->counters().doorbells_sent, 1u) << "B's doorbell, rung by A";
  usleep(20000);
  for (int i = 0; i < 5; ++i) (void)b->RecvBurst(rx, 8);
  EXPECT_EQ(b->counters().rx_doorbells, 1u) << "the doorbell reached B's socket";
  b->WokeUp();  // B
  EXPECT_EQ(b->sleepers(), 0);
  // Without a sleeper arriving: no doorbell.
  ASSERT_TRUE(b->PrepareToSleep());
  b->WokeUp();
  EXPECT_EQ(b->counters().doorbells_sent, 1u);
}

TEST(ShmTransport, UdpModeAndFaultsNeverUseSharedMemory) {
  UdpConfig c;
  c.bind_addresses = {TestIp(46)};
  c.port = TestPort();
  std::string error;
  auto t = CreateTransport(c, TransportMode::kUdp, &error);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(dynamic_cast<ShmTransport*>(t.get()), nullptr);
  t.reset();
  c.faults.rules.emplace_back();
  c.faults.rules.back().action.drop = 0.5;
  t = CreateTransport(c, TransportMode::kAuto, &error);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(dynamic_cast<ShmTransport*>(t.get()), nullptr);
  t.reset();
  c.faults = faults::Scenario{};
  t = CreateTransport(c, TransportMode::kAuto, &error);
  ASSERT_NE(t, nullptr);
  EXPECT_NE(dynamic_cast<ShmTransport*>(t.get()), nullptr);
  TransportMode m;
  EXPECT_TRUE(ParseTransportMode("shm", &m));
  EXPECT_EQ(m, TransportMode::kShm);
  EXPECT_TRUE(ParseTransportMode(nullptr, &m));
  EXPECT_EQ(m, TransportMode::kAuto);
  EXPECT_FALSE(ParseTransportMode("tcp", &m));
}

}  // namespace
}  // namespace softrnic::transport
