// Packet capture files (src/engine/observe/capture.h): paths, bounds and rotation,
// and direct operations rendered as the packets they replace, judged by
// parsing the file back and checking each frame's headers and ICRC.
#include "engine/observe/capture.h"
#include "engine/observe/capture_control.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/pcapng.h"
#include "wire/roce_frame.h"

namespace softrnic::engine {
namespace {

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrnic-capture-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  static std::vector<uint8_t> ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  }
  static wire::pcapng::File Parsed(const std::string& path) {
    std::string error;
    auto f = wire::pcapng::Parse(ReadFile(path), &error);
    EXPECT_TRUE(f) << path << ": " << error;
    return f ? *f : wire::pcapng::File{};
  }
  static transport::Endpoint Ep(const char* ip) {
    return transport::Endpoint{transport::Gid::FromIpv4(inet_addr(ip)), 4791};
  }
  // A 16-byte SEND ONLY packet to QPN `qpn` with PSN `psn` (BTH + ICRC room).
  static std::vector<uint8_t> SendOnly(uint32_t qpn, uint32_t psn) {
    std::vector<uint8_t> p(12 + 4, 0);
    p[0] = wire::op::kRcSendOnly;
    p[5] = static_cast<uint8_t>(qpn >> 16);
    p[6] = static_cast<uint8_t>(qpn >> 8);
    p[7] = static_cast<uint8_t>(qpn);
    p[9] = static_cast<uint8_t>(psn >> 16);
    p[10] = static_cast<uint8_t>(psn >> 8);
    p[11] = static_cast<uint8_t>(psn);
    return p;
  }
  // The BTH .. ICRC of a captured frame, and whether its ICRC holds for
  // the frame's own IPv4/UDP headers.
  static bool IcrcHolds(const std::vector<uint8_t>& frame) {
    if (frame.size() < wire::kRoceFrameHeaderLength + 16) return false;
    wire::IpUdpFields f;
    std::memcpy(f.src_ip, &frame[14 + 12], 4);
    std::memcpy(f.dst_ip, &frame[14 + 16], 4);
    f.src_port = static_cast<uint16_t>(frame[34] << 8 | frame[35]);
    f.dst_port = static_cast<uint16_t>(frame[36] << 8 | frame[37]);
    return wire::CheckIcrc(f, &frame[wire::kRoceFrameHeaderLength],
                           frame.size() - wire::kRoceFrameHeaderLength);
  }
  static uint32_t Psn(const std::vector<uint8_t>& frame) {
    const uint8_t* b = &frame[wire::kRoceFrameHeaderLength];
    return uint32_t{b[9]} << 16 | uint32_t{b[10]} << 8 | b[11];
  }
  static uint8_t Opcode(const std::vector<uint8_t>& frame) {
    return frame[wire::kRoceFrameHeaderLength];
  }

  std::string dir_;
};

TEST(CapturePath, PidAndNthCaptureOfAProcess) {
  EXPECT_EQ(ExpandCapturePath("/tmp/c-%p.pcapng", 42, 0), "/tmp/c-42.pcapng");
  EXPECT_EQ(ExpandCapturePath("/tmp/c-%p.pcapng", 42, 1), "/tmp/c-42-2.pcapng");
  EXPECT_EQ(ExpandCapturePath("/tmp/cap", 7, 2), "/tmp/cap-3");
  EXPECT_EQ(ExpandCapturePath("/tmp.d/cap", 7, 1), "/tmp.d/cap-2") << "a dot in a directory";
  EXPECT_EQ(ExpandCapturePath("%%p%", 5, 0), "%5%");
}

TEST_F(CaptureTest, SentAndReceivedPacketsAreFramedWithDirectionAndAValidIcrc) {
  CaptureSettings s;
  s.path = dir_ + "/c.pcapng";
  std::string error, path;
  {
    auto c = PacketCapture::Open(s, "softrnic0", "test", &error);
    ASSERT_NE(c, nullptr) << error;
    std::vector<uint8_t> pkt = SendOnly(0x123456, 77);
    transport::TxPacket tx;
    tx.data = pkt.data();
    tx.length = static_cast<uint32_t>(pkt.size());
    tx.dst = Ep("10.1.0.2");
    c->RecordTx(tx, Ep("10.1.0.1"), CaptureTimestampNs());
    transport::RxPacket rx;
    rx.data = pkt.data();
    rx.length = static_cast<uint32_t>(pkt.size());
    rx.src = Ep("10.1.0.2");
    c->RecordRx(rx, Ep("10.1.0.1"));
    // Not IPv4: nothing to render it as; counted.
    transport::Endpoint v6;
    v6.gid.raw[0] = 0xfd;
    tx.dst = v6;
    c->RecordTx(tx, Ep("10.1.0.1"), CaptureTimestampNs());
    EXPECT_EQ(c->captured(), 2u);
    EXPECT_EQ(c->not_captured(), 1u);
    path = c->path();
  }
  const auto f = Parsed(path);
  ASSERT_EQ(f.packets.size(), 2u);
  EXPECT_EQ(f.interfaces.at(0).name, "softrnic0");
  EXPECT_EQ(f.packets[0].direction, wire::pcapng::Direction::kOutbound);
  EXPECT_EQ(f.packets[1].direction, wire::pcapng::Direction::kInbound);
  for (const auto& p : f.packets) {
    EXPECT_TRUE(IcrcHolds(p.frame));
    EXPECT_EQ(Psn(p.frame), 77u);
  }
  // Outbound from 10.1.0.1, inbound from 10.1.0.2.
  EXPECT_EQ(f.packets[0].frame[14 + 12 + 3], 1);
  EXPECT_EQ(f.packets[1].frame[14 + 12 + 3], 2);
}

TEST_F(CaptureTest, AFullFileStopsTheCaptureAndKeepsItsStart) {
  CaptureSettings s;
  s.path = dir_ + "/full.pcapng";
  s.max_file_bytes = 4096;
  s.files = 1;
  std::string error;
  auto c = PacketCapture::Open(s, "softrnic0", "", &error);
  ASSERT_NE(c, nullptr) << error;
  std::vector<uint8_t> pkt = SendOnly(1, 0);
  transport::TxPacket tx;
  tx.data = pkt.data();
  tx.length = static_cast<uint32_t>(pkt.size());
  tx.dst = Ep("10.1.0.2");
  for (uint32_t i = 0; i < 200; ++i) {
    pkt = SendOnly(1, i);
    tx.data = pkt.data();
    c->RecordTx(tx, Ep("10.1.0.1"), CaptureTimestampNs());
  }
  const uint64_t kept = c->captured();
  const std::string path = c->path();  // the process's nth capture has a suffix
  EXPECT_GT(kept, 10u);
  EXPECT_LT(kept, 200u);
  EXPECT_EQ(kept + c->not_captured(), 200u);
  c.reset();
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EXPECT_LE(static_cast<uint64_t>(in.tellg()), s.max_file_bytes);
  const auto f = Parsed(path);
  ASSERT_EQ(f.packets.size(), kept);
  EXPECT_EQ(Psn(f.packets.front().frame), 0u) << "the start is kept";
  EXPECT_EQ(Psn(f.packets.back().frame), kept - 1);
}

TEST_F(CaptureTest, RotationKeepsTheMostRecentFiles) {
  CaptureSettings s;
  s.path = dir_ + "/rot.pcapng";
  s.max_file_bytes = 2048;
  s.files = 3;
  std::string error;
  auto c = PacketCapture::Open(s, "softrnic0", "", &error);
  ASSERT_NE(c, nullptr) << error;
  std::vector<uint8_t> pkt;
  transport::TxPacket tx;
  tx.dst = Ep("10.1.0.2");
  constexpr uint32_t kPackets = 300;
  for (uint32_t i = 0; i < kPackets; ++i) {
    pkt = SendOnly(1, i);
    tx.data = pkt.data();
    tx.length = static_cast<uint32_t>(pkt.size());
    c->RecordTx(tx, Ep("10.1.0.1"), CaptureTimestampNs());
  }
  EXPECT_EQ(c->not_captured(), 0u);
  const std::string path = c->path();
  c.reset();
  EXPECT_NE(access((path + ".1").c_str(), F_OK), -1);
  EXPECT_NE(access((path + ".2").c_str(), F_OK), -1);
  EXPECT_EQ(access((path + ".3").c_str(), F_OK), -1) << "only `files` files are kept";
  // path holds the newest packets, path.1 the ones just before, each file
  // within its bound and parseable on its own.
  const auto newest = Parsed(path);
  const auto older = Parsed(path + ".1");
  ASSERT_FALSE(newest.packets.empty());
  ASSERT_FALSE(older.packets.empty());
  EXPECT_EQ(Psn(newest.packets.back().frame), kPackets - 1);
  EXPECT_EQ(Psn(older.packets.back().frame) + 1, Psn(newest.packets.front().frame));
  for (const std::string& p : {path, path + ".1", path + ".2"}) {
    std::ifstream in(p, std::ios::binary | std::ios::ate);
    EXPECT_LE(static_cast<uint64_t>(in.tellg()), s.max_file_bytes) << p;
  }
}

TEST_F(CaptureTest, DirectWriteIsRenderedAsTheSegmentsAndTheAckItReplaces) {
  CaptureSettings s;
  s.path = dir_ + "/direct.pcapng";
  std::string error, path;
  std::vector<uint8_t> data(2500);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  {
    auto c = PacketCapture::Open(s, "softrnic0", "", &error);
    ASSERT_NE(c, nullptr) << error;
    DirectOpRecord op;
    op.op = &GetWrOpcodeInfo(WrOpcode::kRdmaWrite);
    op.requester_qpn = 0x11;
    op.responder_qpn = 0x22;
    op.psn = 0xFFFFFF;  // wraps: 0xFFFFFF, 0, 1
    op.mtu = 1024;
    op.va = 0x1000;
    op.rkey = 0xabcd;
    op.data = data.data();
    op.length = static_cast<uint32_t>(data.size());
    op.requester = Ep("10.1.0.1");
    op.responder = Ep("10.1.0.2");
    c->RecordDirect(op);
    op.op = &GetWrOpcodeInfo(WrOpcode::kAtomicFetchAdd);
    op.data = nullptr;
    op.length = 8;
    op.compare_add = 5;
    op.atomic_orig = 40;
    op.psn = 9;
    c->RecordDirect(op);
    // A READ of 1,500 bytes: the request and two response packets.
    op.op = &GetWrOpcodeInfo(WrOpcode::kRdmaRead);
    op.data = data.data();
    op.length = 1500;
    op.psn = 20;
    c->RecordDirect(op);
    // An ATOMIC WRITE: one packet of its own opcode, and the ACK.
    op.op = &GetWrOpcodeInfo(WrOpcode::kAtomicWrite);
    op.length = 8;
    op.psn = 30;
    c->RecordDirect(op);
    // No other operation goes direct: not rendered (and counted).
    op.op = &GetWrOpcodeInfo(WrOpcode::kRdmaWriteWithImm);
    const uint64_t refused = c->not_captured();
    c->RecordDirect(op);
    EXPECT_EQ(c->not_captured(), refused + 1);
    path = c->path();
  }
  const auto f = Parsed(path);
  ASSERT_EQ(f.packets.size(), 11u);
  // The READ and the ATOMIC WRITE, from the opcode tables by position.
  const uint8_t later[] = {wire::op::kRcReadRequest, wire::op::kRcReadResponseFirst,
                           wire::op::kRcReadResponseLast, wire::op::kRcAtomicWrite, wire::op::kRcAck};
  const uint32_t later_psn[] = {20, 20, 21, 30, 30};
  for (size_t i = 6; i < 11; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(Opcode(f.packets[i].frame), later[i - 6]);
    EXPECT_EQ(Psn(f.packets[i].frame), later_psn[i - 6]);
    EXPECT_TRUE(IcrcHolds(f.packets[i].frame));
  }
  const uint8_t want[] = {wire::op::kRcWriteFirst, wire::op::kRcWriteMiddle,
                          wire::op::kRcWriteLast,  wire::op::kRcAck,
                          wire::op::kRcFetchAdd,   wire::op::kRcAtomicAck};
  const uint32_t want_psn[] = {0xFFFFFF, 0, 1, 1, 9, 9};
  size_t payload_seen = 0;
  for (size_t i = 0; i < 6; ++i) {
    const auto& p = f.packets[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(Opcode(p.frame), want[i]);
    EXPECT_EQ(Psn(p.frame), want_psn[i]);
    EXPECT_TRUE(IcrcHolds(p.frame));
    EXPECT_FALSE(p.comment.empty()) << "a rendered packet says so";
    const bool request = i < 3 || i == 4;
    EXPECT_EQ(p.direction, request ? wire::pcapng::Direction::kOutbound
                                   : wire::pcapng::Direction::kInbound);
    if (i < 3) {
      // The written bytes, in order, after the BTH (and the first packet's RETH).
      const size_t header = wire::kRoceFrameHeaderLength + 12 + (i == 0 ? 16 : 0);
      const size_t n = p.frame.size() - header - 4 - (i == 2 ? (4 - 2500 % 4) % 4 : 0);
      EXPECT_EQ(n, i < 2 ? 1024u : 2500u - 2048u);
      EXPECT_EQ(std::memcmp(&p.frame[header], data.data() + payload_seen, n), 0);
      payload_seen += n;
    }
  }
  EXPECT_EQ(payload_seen, data.size());
  // The atomic ACK carries the original value (AtomicAckETH after the AETH).
  const auto& aack = f.packets[5].frame;
  const uint8_t* orig = &aack[wire::kRoceFrameHeaderLength + 12 + 4];
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v = v << 8 | orig[k];
  EXPECT_EQ(v, 40u);
}

}  // namespace
}  // namespace softrnic::engine

namespace softrnic::engine {
namespace {

// The request `softrnic capture -p` leaves for a running process
// (capture_control.h): what the tool writes reads back, and anything else
// is refused.
TEST(CaptureRequest, FormatReadsBackAndHostileTextIsRefused) {
  CaptureSettings s;
  s.path = "/tmp/softrnic capture.x/7/softrnic-%p.pcapng";  // a space in the path
  s.max_file_bytes = 16ull << 20;
  s.files = 3;
  CaptureSettings back;
  ASSERT_TRUE(ParseCaptureRequest(FormatCaptureRequest(s), &back));
  EXPECT_EQ(back.path, s.path);
  EXPECT_EQ(back.max_file_bytes, s.max_file_bytes);
  EXPECT_EQ(back.files, 3u);
  for (const char* bad : {"", "\n", "/a 1048576 1", "relative 1048576 1\n",
                          "/a 1048575 1\n",            // below 1 MiB
                          "/a 1048576 0\n", "/a 1048576 1001\n", "/a 99999999999999999999999 1\n",
                          "/a 1048576 1\n/b 1048576 1\n", "/a -5 1\n", "/a 1048576 1x\n",
                          " 1048576 1\n"}) {
    CaptureSettings out;
    EXPECT_FALSE(ParseCaptureRequest(bad, &out)) << '"' << bad << '"';
  }
  EXPECT_EQ(CaptureRequestPath("/dev/shm", 42), "/dev/shm/softrnic-42.capture");
}

}  // namespace
}  // namespace softrnic::engine
