// The packet builder and the transmit batch: every packet the engine sends
// (requests, ACKs and NAKs, SACKs, READ responses, atomic ACKs, CNPs) is
// built here, from the packet-opcode table (wire/opcode.h) and a small
// struct of field values, straight into the batch the transport sends in
// one burst (rxe's init_req_packet plays this part for requests).
//
// The opcode decides which extension headers follow the BTH and where
// (IBA 9.2-9.3); the builder writes exactly those, from the fields of the
// same name, and ignores the rest. Thread-safety: the engine lock.
#pragma once

#include <cstdint>
#include <vector>

#include "seal/qp_seal.h"
#include "transport/transport.h"

namespace softrnic::engine {

class PacketCapture;  // capture.h

// The values of one packet's headers. Fields of headers the opcode lacks are
// not read.
struct PacketFields {
  // BTH (IBA 9.2); P_Key is always the default one, the pad count follows
  // from the payload length.
  uint8_t opcode = 0;
  uint32_t dest_qpn = 0;
  uint32_t psn = 0;
  bool ack_req = false;
  bool solicited = false;
  bool becn = false;  // CNP (RoCE v2 A17.9.3)
  bool sr = false;    // softrnic's selective-retransmission bit (docs/loss.md)
  // softrnic's placement bits (wire::Bth::placed): a WRITE packet to a
  // same-host peer that carries only the prefix (or, with placed_suffix,
  // the suffix) of its range; the rest was placed directly.
  bool placed = false;
  bool placed_suffix = false;
  uint8_t placed_run = 0;  // further PMTUs (and PSNs) an empty placed packet stands for
  // RETH (9.3.3) and AtomicETH (9.3.4): the remote memory.
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;  // RETH
  uint64_t swap_add = 0;    // AtomicETH
  uint64_t compare = 0;     // AtomicETH
  // AETH (9.3.5).
  uint8_t syndrome = 0;
  uint32_t msn = 0;
  uint64_t atomic_orig = 0;  // AtomicAckETH (9.5.3)
  uint32_t imm = 0;          // ImmDt (9.3.6): network order, as the application gave it
  uint32_t inv_rkey = 0;     // IETH (9.3.7)
  uint32_t qkey = 0;         // DETH (9.3.2)
  uint32_t src_qp = 0;       // DETH
  uint32_t xrc_srqn = 0;     // XRCETH (XRC requests): the remote XRC SRQ
};

// Writes the BTH and the extension headers of f.opcode to `out`, with the
// pad count for payload_length bytes; returns the header length (where the
// payload starts).
uint32_t WritePacketHeaders(const PacketFields& f, uint32_t payload_length, uint8_t* out);

// The packets waiting to be sent, built in place in fixed buffers.
class TxBatch {
 public:
  static constexpr int kCapacity = 64;
  // Room for a 4096-byte payload plus headers, pad, a seal's trailer and
  // the ICRC.
  static constexpr uint32_t kBufferSize = 4096 + 128;

  TxBatch() : storage_(size_t{kCapacity} * kBufferSize) {}

  bool full() const { return count_ == kCapacity; }
  int count() const { return count_; }
  // Builds the headers of the next packet and zeroes its pad; returns where
  // its payload_length payload bytes go. The caller writes them there, or
  // names them in Commit (`direct`); a packet never committed is dropped by
  // the next Start. REQUIRES: !full().
  uint8_t* Start(const PacketFields& f, uint32_t payload_length);
  // Queues the packet Start built, to `dst` from local endpoint
  // `local_index`; returns its length (BTH to ICRC). direct: its payload
  // stays in registered memory (a transport that accepts_split_payload()).
  // seal: a sealed QP's (docs/sealed.md): the packet is sealed in the
  // batch's buffer (a direct payload is encrypted into it on the way, so it
  // stops being direct); 0 if sealing failed (the packet is not queued).
  uint32_t Commit(uint16_t local_index, const transport::Endpoint& dst,
                  const uint8_t* direct = nullptr, seal::QpSeal* seal = nullptr);
  // Hands the batch to the transport. A full socket buffer is retried
  // briefly; a full shared-memory ring is waited for (bounded); what still
  // cannot leave is dropped, for RC recovery to resend.
  void Flush(transport::Transport& transport);
  // Records every packet the transport takes (null: none).
  void set_capture(PacketCapture* capture) { capture_ = capture; }

 private:
  PacketCapture* capture_ = nullptr;
  std::vector<uint8_t> storage_;
  transport::TxPacket packets_[kCapacity];
  int count_ = 0;
  // The packet Start built.
  uint32_t head_length_ = 0;
  uint32_t payload_length_ = 0;
};

}  // namespace softrnic::engine
