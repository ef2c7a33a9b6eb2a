// The host NIC's steering program (steering.h).
#include "transport/host_nic/steering.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <functional>

#include "wire/opcode.h"

namespace softrnic::transport::host_nic {
namespace {

// Offsets in the UDP payload (the program sees it from the BTH on).
constexpr uint32_t kBthOpcode = 0;
constexpr uint32_t kBthDestQpWord = 4;  // resv8 | DestQP (IBA 9.2, Table 15)
constexpr uint32_t kBthLane = 5;        // DestQP's top byte
// A GSI MAD on RoCE v2: BTH (12) + DETH (8), then the MAD header (IBA
// 13.4.2: AttributeID at byte 16) and the CM message (IBA 12.6).
constexpr uint32_t kMadStart = 12 + 8;
constexpr uint32_t kAttributeId = kMadStart + 16;
constexpr uint32_t kCmData = kMadStart + 24;
constexpr uint32_t kCmLocalCommId = kCmData;       // REQ ... ; SIDR's RequestID
constexpr uint32_t kCmRemoteCommId = kCmData + 4;  // REP, RTU, REJ, MRA, DREQ, DREP, LAP, APR
constexpr uint32_t kCmServiceIdLow = kCmData + 12;  // REQ, SIDR_REQ: ServiceID bytes 4..7
// CM attribute IDs (IBA 16.7.2, Table 210 / 12.6).
constexpr uint32_t kCmReq = 0x0010;
constexpr uint32_t kCmSidrReq = 0x0017;
constexpr uint32_t kCmSidrRep = 0x0018;
constexpr uint32_t kGsiQpn = 1;

// A tiny assembler: conditional jumps of classic BPF reach 255 instructions
// ahead, so every branch to a label is "skip the next instruction or fall
// into an unconditional jump" (BPF_JA takes a 32-bit offset).
class Assembler {
 public:
  using Label = size_t;
  Label NewLabel() {
    label_at_.push_back(SIZE_MAX);
    return label_at_.size() - 1;
  }
  void Bind(Label l) { label_at_[l] = code_.size(); }
  void Emit(uint16_t code, uint32_t k, uint8_t jt = 0, uint8_t jf = 0) {
    code_.push_back(sock_filter{code, jt, jf, k});
  }
  void LoadByte(uint32_t offset) { Emit(BPF_LD | BPF_B | BPF_ABS, offset); }
  void LoadHalf(uint32_t offset) { Emit(BPF_LD | BPF_H | BPF_ABS, offset); }
  void LoadWord(uint32_t offset) { Emit(BPF_LD | BPF_W | BPF_ABS, offset); }
  void And(uint32_t mask) { Emit(BPF_ALU | BPF_AND | BPF_K, mask); }
  void Return(uint32_t value) { Emit(BPF_RET | BPF_K, value); }
  void Jump(Label l) {
    fixups_.push_back({code_.size(), l});
    Emit(BPF_JMP | BPF_JA, 0);
  }
  // if (A <op> k) goto l; else fall through.
  void JumpIf(uint16_t op, uint32_t k, Label l) {
    Emit(BPF_JMP | op | BPF_K, k, 0, 1);  // true: into the jump; false: past it
    Jump(l);
  }
  size_t size() const { return code_.size(); }
  void SetFalseOffset(size_t at, uint8_t offset) { code_[at].jf = offset; }
  std::vector<sock_filter> Finish() {
    for (const auto& [at, label] : fixups_)
      code_[at].k = static_cast<uint32_t>(label_at_[label] - at - 1);
    return std::move(code_);
  }

 private:
  std::vector<sock_filter> code_;
  std::vector<size_t> label_at_;
  std::vector<std::pair<size_t, Label>> fixups_;
};

// Emits a binary search over sorted `keys` (A holds the key); `leaf(i)`
// emits the code for keys[i] matching; a miss returns `miss`.
void EmitSearch(Assembler& a, const std::vector<uint32_t>& keys, size_t lo, size_t hi,
                uint32_t miss, const std::function<void(size_t)>& leaf) {
  if (hi - lo == 1) {
    // jeq key: into the body; else over it (the body is a few
    // instructions, within a conditional jump's reach) to "nowhere".
    const size_t at = a.size();
    a.Emit(BPF_JMP | BPF_JEQ | BPF_K, keys[lo], 0, 0);
    leaf(lo);
    a.SetFalseOffset(at, static_cast<uint8_t>(a.size() - at - 1));
    a.Return(miss);
    return;
  }
  const size_t mid = lo + (hi - lo) / 2;
  Assembler::Label upper = a.NewLabel();
  a.JumpIf(BPF_JGE, keys[mid], upper);
  EmitSearch(a, keys, lo, mid, miss, leaf);
  a.Bind(upper);
  EmitSearch(a, keys, mid, hi, miss, leaf);
}

}  // namespace

std::vector<sock_filter> BuildSteeringProgram(const SteeringTable& table) {
  std::vector<LaneSockets> lanes = table.lanes;
  std::sort(lanes.begin(), lanes.end(),
            [](const LaneSockets& x, const LaneSockets& y) { return x.lane < y.lane; });
  std::vector<ServiceSockets> services = table.services;
  auto service_key = [](const ServiceSockets& s) {
    return (uint32_t{s.port_space} << 16) | s.port;
  };
  std::sort(services.begin(), services.end(),
            [&](const ServiceSockets& x, const ServiceSockets& y) {
              return service_key(x) < service_key(y);
            });

  // Classic BPF jumps only forward: the QP1 branch comes first and ends in
  // a jump to the lane search, which comes last.
  Assembler a;
  Assembler::Label by_lane = a.NewLabel();
  Assembler::Label gsi = a.NewLabel();
  a.LoadWord(kBthDestQpWord);
  a.And(0x00FFFFFF);
  a.JumpIf(BPF_JEQ, kGsiQpn, gsi);
  a.LoadByte(kBthLane);
  a.Jump(by_lane);

  a.Bind(gsi);  // a MAD to QP1: by service ID or by the addressed comm ID
  Assembler::Label by_service = a.NewLabel();
  Assembler::Label sidr_rep = a.NewLabel();
  a.LoadHalf(kAttributeId);
  a.JumpIf(BPF_JEQ, kCmReq, by_service);
  a.JumpIf(BPF_JEQ, kCmSidrReq, by_service);
  a.JumpIf(BPF_JEQ, kCmSidrRep, sidr_rep);
  a.LoadByte(kCmRemoteCommId);  // the comm ID's top byte: its owner's lane
  a.Jump(by_lane);
  a.Bind(sidr_rep);
  a.LoadByte(kCmLocalCommId);  // the RequestID the requester chose
  a.Jump(by_lane);

  a.Bind(by_service);
  if (services.empty()) {
    a.Return(table.service_miss_index);
  } else {
    a.LoadWord(kCmServiceIdLow);  // port space << 16 | port (rdma_cm's service IDs)
    std::vector<uint32_t> keys;
    for (const ServiceSockets& s : services) keys.push_back(service_key(s));
    EmitSearch(a, keys, 0, keys.size(), table.service_miss_index,
               [&](size_t i) { a.Return(services[i].main_index); });
  }

  a.Bind(by_lane);  // A = a lane
  if (lanes.empty()) {
    a.Return(table.miss_index);
  } else {
    std::vector<uint32_t> keys;
    for (const LaneSockets& l : lanes) keys.push_back(l.lane);
    EmitSearch(a, keys, 0, keys.size(), table.miss_index, [&](size_t i) {
      // RC responses to the reply socket (udp_socket.h), the rest to main.
      a.LoadByte(kBthOpcode);
      a.Emit(BPF_JMP | BPF_JGE | BPF_K, wire::op::kRcReadResponseFirst, 0, 2);
      a.Emit(BPF_JMP | BPF_JGT | BPF_K, wire::op::kRcAtomicAck, 1, 0);
      a.Return(lanes[i].reply_index);
      a.Return(lanes[i].main_index);
    });
  }
  return a.Finish();
}

int AttachSteeringProgram(int fd, const std::vector<sock_filter>& program) {
  if (program.empty() || program.size() > BPF_MAXINSNS) return EINVAL;
  sock_fprog prog{static_cast<unsigned short>(program.size()),
                  const_cast<sock_filter*>(program.data())};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0)
    return errno;
  return 0;
}

}  // namespace softrnic::transport::host_nic
