// Outside judgement of packets built by our C++ code: write them into a pcap
// and run tests/integration/icrc_judge.py on it (scapy's ICRC + an
// independent ICRC + tshark's BTH decode). Skipped, with the reason, when no
// python3 with scapy is available. The judge is found next to this file's
// source (via __FILE__) or at $SOFTRNIC_ICRC_JUDGE.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "wire/byte_order.h"
#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace softrnic::wire {
namespace {

namespace fs = std::filesystem;

int RunShell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  if (rc == -1 || !WIFEXITED(rc)) return -1;
  return WEXITSTATUS(rc);
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A python3 that can import scapy.contrib.roce, or "" (with the reason).
std::string FindPythonWithScapy(std::string* why) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SOFTRNIC_PYTHON")) candidates.emplace_back(env);
  // Debian's python3-scapy lives under /usr/bin/python3; a pyenv or venv
  // python3 earlier on PATH usually lacks it.
  candidates.emplace_back("/usr/bin/python3");
  candidates.emplace_back("python3");
  for (const std::string& py : candidates) {
    if (RunShell(ShellQuote(py) + " -c 'import scapy.contrib.roce' >/dev/null 2>&1") == 0) {
      return py;
    }
  }
  *why = "no python3 with scapy.contrib.roce (apt-get install python3-scapy)";
  return "";
}

std::string FindJudge(std::string* why) {
  if (const char* env = std::getenv("SOFTRNIC_ICRC_JUDGE")) return env;
  std::error_code ec;
  const fs::path p =
      fs::weakly_canonical(fs::path(__FILE__).parent_path() / "../../integration/icrc_judge.py", ec);
  if (!ec && fs::exists(p)) return p.string();
  *why = "icrc_judge.py not found next to " + std::string(__FILE__) +
         " (set SOFTRNIC_ICRC_JUDGE)";
  return "";
}

// ------------------------------------------------------------ frames ----

uint16_t OnesComplementSum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += LoadBe16(p + i);
  if (n & 1) sum += uint32_t{p[n - 1]} << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

struct Frame {
  IpUdpFields ip;
  std::vector<uint8_t> transport;  // BTH .. ICRC
};

// Ethernet + IP + UDP + transport, with the IP/UDP headers the kernel would
// send for `f` (and some variant field values set, which the ICRC masks).
std::vector<uint8_t> ToEthernet(const Frame& fr) {
  const IpUdpFields& f = fr.ip;
  const size_t udp_len = 8 + fr.transport.size();
  std::vector<uint8_t> out = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01};
  out.push_back(f.ipv6 ? 0x86 : 0x08);
  out.push_back(f.ipv6 ? 0xDD : 0x00);
  const size_t ip_off = out.size();
  if (!f.ipv6) {
    uint8_t h[20] = {0x45, 0x02 /* ECT(0) */};
    StoreBe16(h + 2, static_cast<uint16_t>(20 + udp_len));
    StoreBe16(h + 4, f.ipv4_id);
    StoreBe16(h + 6, f.ipv4_flags_frag);
    h[8] = 64;
    h[9] = 17;
    std::memcpy(h + 12, f.src_ip, 4);
    std::memcpy(h + 16, f.dst_ip, 4);
    StoreBe16(h + 10, static_cast<uint16_t>(~OnesComplementSum(h, 20)));
    out.insert(out.end(), h, h + 20);
  } else {
    uint8_t h[40] = {};
    StoreBe32(h, (6u << 28) | (0x68u << 20) | 0xABCDE);  // TC and flow label: masked
    StoreBe16(h + 4, static_cast<uint16_t>(udp_len));
    h[6] = 17;
    h[7] = 64;
    std::memcpy(h + 8, f.src_ip, 16);
    std::memcpy(h + 24, f.dst_ip, 16);
    out.insert(out.end(), h, h + 40);
  }
  const size_t udp_off = out.size();
  uint8_t u[8];
  StoreBe16(u, f.src_port);
  StoreBe16(u + 2, f.dst_port);
  StoreBe16(u + 4, static_cast<uint16_t>(udp_len));
  StoreBe16(u + 6, 0);
  out.insert(out.end(), u, u + 8);
  out.insert(out.end(), fr.transport.begin(), fr.transport.end());
  if (f.ipv6) {
    // IPv6 forbids a zero UDP checksum; compute it (it is masked in the ICRC).
    uint32_t sum = 0;
    const uint8_t* ip = &out[ip_off];
    sum = OnesComplementSum(ip + 8, 32);
    sum += static_cast<uint32_t>(udp_len) + 17;
    uint16_t c = static_cast<uint16_t>(~OnesComplementSum(&out[udp_off], udp_len, sum));
    if (c == 0) c = 0xFFFF;
    StoreBe16(&out[udp_off + 6], c);
  }
  return out;
}

void WritePcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames) {
  std::ofstream os(path, std::ios::binary);
  auto put32 = [&os](uint32_t v) { os.write(reinterpret_cast<const char*>(&v), 4); };
  auto put16 = [&os](uint16_t v) { os.write(reinterpret_cast<const char*>(&v), 2); };
  put32(0xa1b2c3d4);  // host byte order: readers detect endianness from it
  put16(2);
  put16(4);
  put32(0);
  put32(0);
  put32(65535);
  put32(1);  // LINKTYPE_ETHERNET
  uint32_t sec = 1700000000;
  for (const auto& f : frames) {
    put32(sec++);
    put32(0);
    put32(static_cast<uint32_t>(f.size()));
    put32(static_cast<uint32_t>(f.size()));
    os.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
  }
  ASSERT_TRUE(os.good()) << path;
}

IpUdpFields Addrs(bool v6, uint16_t sport) {
  IpUdpFields f;
  f.ipv6 = v6;
  if (!v6) {
    const uint8_t s[4] = {192, 0, 2, 1}, d[4] = {192, 0, 2, 2};
    std::memcpy(f.src_ip, s, 4);
    std::memcpy(f.dst_ip, d, 4);
  } else {
    // IPv4-mapped GIDs as RoCE v2 uses for IPv4 peers would go over IPv4;
    // use documentation IPv6 addresses here.
    const uint8_t s[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    const uint8_t d[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    std::memcpy(f.src_ip, s, 16);
    std::memcpy(f.dst_ip, d, 16);
  }
  f.src_port = sport;
  return f;
}

// A packet of `opcode` built the way the requester/responder will: BTH via
// setters, extension headers at the table's offsets, payload, pad, ICRC.
Frame Make(uint8_t opcode, uint32_t dqpn, uint32_t psn, size_t payload, const IpUdpFields& ip) {
  const OpcodeInfo& info = GetOpcodeInfo(opcode);
  const size_t pad = (4 - payload % 4) % 4;
  Frame fr;
  fr.ip = ip;
  fr.transport.assign(info.header_length + payload + pad + kIcrcSize, 0);
  uint8_t* t = fr.transport.data();
  Bth bth;
  bth.set_opcode(opcode);
  bth.set_pad_count(static_cast<uint8_t>(pad));
  bth.set_pkey(kDefaultPkey);
  bth.set_dest_qp(dqpn);
  bth.set_psn(psn);
  bth.set_ack_req(info.has(kLast) && info.has(kIsRequest));
  bth.set_solicited(info.has(kHasImm));
  std::memcpy(t, bth.b.data(), 12);
  if (info.reth_offset) {
    Reth r;
    r.set_va(0x7f00deadb000);
    r.set_rkey(0x1234);
    r.set_dma_length(static_cast<uint32_t>(payload));
    std::memcpy(t + info.reth_offset, r.b.data(), 16);
  }
  if (info.aeth_offset) {
    Aeth a;
    a.set_syndrome(kAckSyndromeNoCredit);
    a.set_msn(3);
    std::memcpy(t + info.aeth_offset, a.b.data(), 4);
  }
  if (info.atomic_eth_offset) {
    AtomicEth a;
    a.set_va(0x7f00deadb008);
    a.set_rkey(0x1234);
    a.set_swap_add(5);
    a.set_compare(6);
    std::memcpy(t + info.atomic_eth_offset, a.b.data(), 28);
  }
  if (info.atomic_ack_eth_offset) {
    AtomicAckEth a;
    a.set_orig(42);
    std::memcpy(t + info.atomic_ack_eth_offset, a.b.data(), 8);
  }
  if (info.deth_offset) {
    Deth d;
    d.set_qkey(0x11111111);
    d.set_src_qp(0x99);
    std::memcpy(t + info.deth_offset, d.b.data(), 8);
  }
  if (info.imm_offset) t[info.imm_offset + 3] = 0x7;
  if (info.ieth_offset) {
    Ieth i;
    i.set_rkey(0x5678);
    std::memcpy(t + info.ieth_offset, i.b.data(), 4);
  }
  if (info.has(kIsCnp)) {
    // A17.9.3: BECN set, 16 reserved (zero) bytes after the BTH.
    Bth b;
    std::memcpy(b.b.data(), t, 12);
    b.set_becn(true);
    std::memcpy(t, b.b.data(), 12);
  } else {
    for (size_t i = 0; i < payload; ++i) t[info.header_length + i] = static_cast<uint8_t>(i * 7);
  }
  AppendIcrc(ip, t, fr.transport.size());
  return fr;
}

class IcrcJudgeTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    python_ = FindPythonWithScapy(&why);
    if (python_.empty()) GTEST_SKIP() << why;
    judge_ = FindJudge(&why);
    if (judge_.empty()) GTEST_SKIP() << why;
    tshark_ = RunShell("command -v tshark >/dev/null 2>&1") == 0;
    dir_ = testing::TempDir() + "softrnic_icrc_judge_" + std::to_string(getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  // Runs the judge; returns its exit status and leaves its output in *out.
  int Judge(const std::string& args, std::string* out) {
    const std::string log = dir_ + "/judge.log";
    const std::string cmd = ShellQuote(python_) + " " + ShellQuote(judge_) + " " + args +
                            (tshark_ ? "" : " --no-tshark") + " >" + ShellQuote(log) + " 2>&1";
    const int rc = RunShell(cmd);
    std::ifstream is(log);
    std::stringstream ss;
    ss << is.rdbuf();
    *out = ss.str();
    return rc;
  }

  std::vector<Frame> CppFrames() {
    std::vector<Frame> fr;
    for (bool v6 : {false, true}) {
      const IpUdpFields ip = Addrs(v6, v6 ? 0xD00D : 0xC0DE);
      fr.push_back(Make(op::kRcSendOnly, 0x12, 0xFFFFFE, 13, ip));  // pad 3
      fr.push_back(Make(op::kRcSendOnlyImm, 0x12, 0xFFFFFF, 8, ip));
      fr.push_back(Make(op::kRcWriteFirst, 0x12, 0, 256, ip));
      fr.push_back(Make(op::kRcWriteMiddle, 0x12, 1, 256, ip));
      fr.push_back(Make(op::kRcWriteLastImm, 0x12, 2, 3, ip));
      fr.push_back(Make(op::kRcReadRequest, 0x12, 3, 0, ip));
      fr.push_back(Make(op::kRcReadResponseOnly, 0x13, 3, 1024, ip));
      fr.push_back(Make(op::kRcAck, 0x13, 2, 0, ip));
      fr.push_back(Make(op::kRcCompareSwap, 0x12, 4, 0, ip));
      fr.push_back(Make(op::kRcAtomicAck, 0x13, 4, 0, ip));
      fr.push_back(Make(op::kRcSendOnlyInv, 0x12, 5, 4, ip));
      fr.push_back(Make(op::kUcWriteOnly, 0x12, 6, 1, ip));
      fr.push_back(Make(op::kUdSendOnlyImm, 0x12, 7, 40, ip));
      fr.push_back(Make(op::kCnp, 0x12, 0, 16, ip));
    }
    // A connected socket numbering IPv4 IDs, DF off: still a valid ICRC as
    // long as it was computed for the ID actually sent.
    IpUdpFields odd = Addrs(false, 1);
    odd.ipv4_id = 0xBEEF;
    odd.ipv4_flags_frag = 0;
    fr.push_back(Make(op::kRcSendOnly, 0x12, 8, 4, odd));
    return fr;
  }

  std::string python_, judge_, dir_;
  bool tshark_ = false;
};

TEST_F(IcrcJudgeTest, JudgeAcceptsPacketsBuiltByOurCode) {
  const std::vector<Frame> frames = CppFrames();
  std::vector<std::vector<uint8_t>> eth;
  for (const Frame& f : frames) {
    // Sanity: our own parser and checker accept what we built.
    Packet p;
    ASSERT_EQ(ParsePacket(f.transport.data(), f.transport.size(), &p), ParseError::kOk);
    ASSERT_TRUE(CheckIcrc(f.ip, f.transport.data(), f.transport.size()));
    eth.push_back(ToEthernet(f));
  }
  const std::string pcap = dir_ + "/cpp_packets.pcap";
  WritePcap(pcap, eth);
  std::string out;
  const int rc = Judge(ShellQuote(pcap) + " -v --min-packets " + std::to_string(frames.size()) +
                           " --expect-opcodes 0x04,0x05,0x06,0x07,0x09,0x0c,0x10,0x11,0x12,0x13,"
                           "0x17,0x2a,0x65,0x81 --expect-dqpn 0x12,0x13",
                       &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(std::to_string(frames.size()) + " RoCE packets"), std::string::npos) << out;
  if (!tshark_) std::printf("note: tshark not installed, BTH decode cross-check skipped\n");
}

TEST_F(IcrcJudgeTest, JudgeRejectsCorruptedCppPacket) {
  std::vector<Frame> frames = CppFrames();
  // Corrupt one payload byte of frame 3 after the ICRC was computed, and the
  // ICRC of frame 5: the judge must fail and name both frames.
  frames[2].transport[40] ^= 0x10;
  frames[4].transport.back() ^= 0x01;
  std::vector<std::vector<uint8_t>> eth;
  for (const Frame& f : frames) eth.push_back(ToEthernet(f));
  const std::string pcap = dir_ + "/corrupt.pcap";
  WritePcap(pcap, eth);
  std::string out;
  EXPECT_EQ(Judge(ShellQuote(pcap), &out), 1) << out;
  EXPECT_NE(out.find("frame 3: ICRC mismatch"), std::string::npos) << out;
  EXPECT_NE(out.find("frame 5: ICRC mismatch"), std::string::npos) << out;
  EXPECT_EQ(out.find("frame 1:"), std::string::npos) << out;
}

// The judge's own self-test (scapy-built good/bad packets, expectations,
// tshark comparison), so ctest exercises it too.
TEST_F(IcrcJudgeTest, JudgeSelfTest) {
  std::string out;
  const std::string cmd = ShellQuote(python_) + " " + ShellQuote(judge_) + " --self-test >" +
                          ShellQuote(dir_ + "/self.log") + " 2>&1";
  const int rc = RunShell(cmd);
  std::ifstream is(dir_ + "/self.log");
  std::stringstream ss;
  ss << is.rdbuf();
  EXPECT_EQ(rc, 0) << ss.str();
  EXPECT_NE(ss.str().find("self-test: all passed"), std::string::npos) << ss.str();
}

}  // namespace
}  // namespace softrnic::wire
