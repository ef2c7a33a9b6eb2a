// Packet capture (SOFTRNIC_CAPTURE; `softrnic capture`, docs/capture.md): a
// pcapng file of every RoCE v2 packet a device sends and receives, on every
// path, rendered as Ethernet/IPv4/UDP frames with a valid ICRC
// (wire/roce_frame.h) so that Wireshark's RoCE dissector decodes them:
//   - UDP: the packets the engine hands the kernel and gets from it;
//   - shared-memory rings: the same packets, which never had IP/UDP headers;
//   - direct one-sided operations (shm_direct.h), which send no packet at
//     all: rendered by the requester as the packets they replace (request
//     packets split at the path MTU, then the ACK, READ responses or atomic
//     ACK of the target, whose CPU takes no part), each with a comment
//     saying so. Direct operations consume no PSN: their packets carry the
//     PSNs the QP's next request would take, so the packet after them may
//     show the same PSN again.
// Packets are recorded where the engine meets its transport (before fault
// injection on the way out; after the ICRC check on the way in: what a
// transport dropped as corrupt is not recorded). Each record carries its
// direction (pcapng epb_flags), so `softrnic capture` can merge the files of
// several processes keeping each packet once.
//
// Bounded: a file holds at most max_file_bytes; with files == 1 the capture
// then stops (the start is kept, the rest counted in not_captured()), with
// files > 1 the file is rotated (path -> path.1 -> ... -> path.<files-1>,
// the oldest removed), keeping the most recent. No cost when off: the
// engine holds a null pointer.
//
// Thread-safety: Record* are called under the engine lock; an internal mutex
// serialises them with Flush from the exit handler.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/wr_opcode.h"
#include "transport/transport.h"
#include "wire/pcapng.h"

namespace softrnic::engine {

struct CaptureSettings {
  std::string path;  // empty: off. "%p" stands for the pid
  uint64_t max_file_bytes = 256ull << 20;
  unsigned files = 1;
};

// A direct one-sided operation, as capture renders it (shm_direct.cc).
struct DirectOpRecord {
  // The WR opcode's row (wr_opcode.h): which packets the operation would
  // have been on the wire (RDMA WRITE, ATOMIC WRITE, READ or an atomic).
  const WrOpcodeInfo* op = nullptr;
  uint32_t requester_qpn = 0;
  uint32_t responder_qpn = 0;
  uint32_t psn = 0;  // the QP's next PSN (direct operations consume none)
  uint32_t mtu = 1024;
  uint64_t va = 0;
  uint32_t rkey = 0;
  const uint8_t* data = nullptr;  // WRITE: what was written; READ: what was read
  uint32_t length = 0;
  uint64_t compare_add = 0, swap = 0, atomic_orig = 0;
  transport::Endpoint requester, responder;
};

class PacketCapture {
 public:
  // Opens the first file (O_CREAT|O_TRUNC|O_NOFOLLOW, mode 0600). `device`
  // and `description` name the pcapng interface. Null with *error set if
  // the file cannot be created.
  static std::unique_ptr<PacketCapture> Open(const CaptureSettings& settings,
                                             std::string_view device,
                                             std::string_view description, std::string* error);
  ~PacketCapture();
  PacketCapture(const PacketCapture&) = delete;
  PacketCapture& operator=(const PacketCapture&) = delete;

  // `sent_ns`: CaptureTimestampNs() taken before the packet was handed to
  // the transport, so that it sorts before anything the peer did with it.
  void RecordTx(const transport::TxPacket& p, const transport::Endpoint& src, int64_t sent_ns);
  void RecordRx(const transport::RxPacket& p, const transport::Endpoint& dst);
  void RecordDirect(const DirectOpRecord& op);
  // Writes what is buffered (the engine calls it before its progress thread
  // sleeps; records flush by themselves every 50 ms or 256 KiB).
  void Flush();

  const std::string& path() const { return path_; }
  uint64_t captured() const;
  uint64_t not_captured() const;  // refused: file full (files == 1) or write errors

 private:
  PacketCapture(const CaptureSettings& settings, std::string path, std::string interface_name,
                std::string description);
  bool OpenFileLocked();
  void RotateLocked();
  void WriteLocked(wire::pcapng::Direction direction, std::string_view comment,
                   int64_t timestamp_ns);
  void FlushLocked();

  const CaptureSettings settings_;
  const std::string path_;
  // The process that opened the file: a forked child inherits this object
  // and its descriptor, and must not write its copy of the buffer into the
  // parent's file (its own device opens a capture of its own).
  const int owner_pid_;
  const std::string interface_name_, description_;
  mutable std::mutex mu_;
  int fd_ = -1;
  bool stopped_ = false;  // full with files == 1, or the file could not be written
  uint64_t file_bytes_ = 0;
  uint64_t captured_ = 0, not_captured_ = 0;
  int64_t last_flush_ns_ = 0;
  std::vector<uint8_t> buffer_;  // blocks not yet written
  std::vector<uint8_t> frame_;   // scratch: the frame being recorded
  std::vector<uint8_t> flat_;    // scratch: a packet's bytes before its ICRC
};

// The capture's clock: CLOCK_REALTIME in nanoseconds (one clock for every
// process of the host, so their files merge in order).
int64_t CaptureTimestampNs();

// "%p" in `path_template` replaced by the pid; for a process's second and
// later captures, "-<n>" before the extension.
std::string ExpandCapturePath(std::string_view path_template, int pid, int nth);

}  // namespace softrnic::engine
