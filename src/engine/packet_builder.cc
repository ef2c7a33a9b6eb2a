#include "engine/packet_builder.h"

#include "engine/observe/capture.h"

#include <sched.h>

#include <chrono>
#include <cstring>

#include "wire/headers.h"
#include "wire/opcode.h"

namespace softrnic::engine {
namespace {

// Writes header H at `offset` if the opcode has it (offset 0: it has not),
// its fields set by `fill`.
template <typename H, typename Fill>
void PutIf(uint8_t offset, uint8_t* out, Fill fill) {
  if (offset == 0) return;
  H h;
  fill(h);
  std::memcpy(out + offset, h.b.data(), sizeof(h));
}

uint8_t PadFor(uint32_t payload_length) {
  return static_cast<uint8_t>((4 - (payload_length & 3)) & 3);
}

// A full shared-memory ring is waited for this long at most.
constexpr auto kShmTxWait = std::chrono::milliseconds(5);

}  // namespace

uint32_t WritePacketHeaders(const PacketFields& f, uint32_t payload_length, uint8_t* out) {
  const wire::OpcodeInfo& info = wire::GetOpcodeInfo(f.opcode);
  wire::Bth bth;
  bth.set_opcode(f.opcode);
  bth.set_solicited(f.solicited);
  bth.set_pad_count(PadFor(payload_length));
  bth.set_pkey(wire::kDefaultPkey);
  bth.set_becn(f.becn);
  bth.set_dest_qp(f.dest_qpn);
  bth.set_ack_req(f.ack_req);
  bth.set_sr(f.sr);
  bth.set_placed(f.placed);
  bth.set_placed_suffix(f.placed_suffix);
  bth.set_placed_run(f.placed_run);
  bth.set_psn(f.psn);
  std::memcpy(out, bth.b.data(), sizeof(bth));
  PutIf<wire::XrcEth>(info.xrceth_offset, out, [&](wire::XrcEth& h) { h.set_srqn(f.xrc_srqn); });
  PutIf<wire::Deth>(info.deth_offset, out, [&](wire::Deth& h) {
    h.set_qkey(f.qkey);
    h.set_src_qp(f.src_qp);
  });
  PutIf<wire::Reth>(info.reth_offset, out, [&](wire::Reth& h) {
    h.set_va(f.va);
    h.set_rkey(f.rkey);
    h.set_dma_length(f.dma_length);
  });
  PutIf<wire::AtomicEth>(info.atomic_eth_offset, out, [&](wire::AtomicEth& h) {
    h.set_va(f.va);
    h.set_rkey(f.rkey);
    h.set_swap_add(f.swap_add);
    h.set_compare(f.compare);
  });
  PutIf<wire::Aeth>(info.aeth_offset, out, [&](wire::Aeth& h) {
    h.set_syndrome(f.syndrome);
    h.set_msn(f.msn);
  });
  PutIf<wire::AtomicAckEth>(info.atomic_ack_eth_offset, out,
                            [&](wire::AtomicAckEth& h) { h.set_orig(f.atomic_orig); });
  PutIf<wire::ImmDt>(info.imm_offset, out, [&](wire::ImmDt& h) { h.set_raw(f.imm); });
  PutIf<wire::Ieth>(info.ieth_offset, out, [&](wire::Ieth& h) { h.set_rkey(f.inv_rkey); });
  return info.header_length;
}

uint8_t* TxBatch::Start(const PacketFields& f, uint32_t payload_length) {
  uint8_t* buf = &storage_[size_t(count_) * kBufferSize];
  head_length_ = WritePacketHeaders(f, payload_length, buf);
  payload_length_ = payload_length;
  std::memset(buf + head_length_ + payload_length, 0, PadFor(payload_length));
  return buf + head_length_;
}

uint32_t TxBatch::Commit(uint16_t local_index, const transport::Endpoint& dst,
                         const uint8_t* direct, seal::QpSeal* seal) {
  transport::TxPacket& p = packets_[count_];
  p.data = &storage_[size_t(count_) * kBufferSize];
  p.length = head_length_ + payload_length_ + PadFor(payload_length_) +
             static_cast<uint32_t>(wire::kIcrcSize);
  if (seal != nullptr) {
    static_assert(kBufferSize >= 4096 + 64 + 3 + seal::kTrailerBytes + wire::kIcrcSize);
    if (!seal->Seal(&storage_[size_t(count_) * kBufferSize], head_length_, direct,
                    payload_length_, PadFor(payload_length_)))
      return 0;
    p.length += seal::kTrailerBytes;
    direct = nullptr;  // encrypted into the buffer
  }
  p.payload = direct;
  p.payload_length = direct != nullptr ? payload_length_ : 0;
  p.head_length = direct != nullptr ? head_length_ : 0;
  p.local_index = local_index;
  p.dst = dst;
  ++count_;
  return p.length;
}

void TxBatch::Flush(transport::Transport& transport) {
  int sent = 0;
  int stalls = 0;
  std::chrono::steady_clock::time_point wait_until{};
  while (sent < count_) {
    const int64_t handed_ns = capture_ != nullptr ? CaptureTimestampNs() : 0;
    const int r = transport.SendBurst(packets_ + sent, count_ - sent);
    if (r > 0) {
      if (capture_ != nullptr) {
        const auto locals = transport.locals();
        for (int i = sent; i < sent + r; ++i)
          if (packets_[i].local_index < locals.size())
            capture_->RecordTx(packets_[i], locals[packets_[i].local_index], handed_ns);
      }
      sent += r;
      stalls = 0;
      continue;
    }
    // The socket buffer is full: give the receiver a moment, then let RC
    // recovery handle what could not be sent. A full shared-memory ring is
    // drained by a peer that is running (or was just woken): wait for it,
    // bounded (kShmTxWait), so that UC bursts larger than the ring are not
    // lost and RC does not have to time out.
    if (++stalls > 8) {
      if (!transport.WaitWhenBusy()) break;
      const auto now = std::chrono::steady_clock::now();
      if (wait_until == std::chrono::steady_clock::time_point{}) wait_until = now + kShmTxWait;
      if (now > wait_until) break;
    }
    sched_yield();
  }
  count_ = 0;
}

}  // namespace softrnic::engine
