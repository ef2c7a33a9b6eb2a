#include "engine/observe/capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "engine/packet_builder.h"
#include "log/log.h"
#include "wire/headers.h"
#include "wire/opcode.h"
#include "wire/roce_frame.h"

namespace softrnic::engine {
namespace {

using wire::pcapng::Direction;

// Records are buffered and written in blocks: at most this much, or this
// long, waits in memory.
constexpr size_t kFlushBytes = 256 * 1024;
constexpr int64_t kFlushIntervalNs = 50'000'000;

constexpr char kDirectRequestComment[] =
    "softrnic: direct shared-memory operation, no packet was sent; rendered as the request "
    "it replaces (PSN not consumed)";
constexpr char kDirectResponseComment[] =
    "softrnic: direct shared-memory operation, the target's CPU sent nothing; rendered as the "
    "response it replaces (MSN unknown: 0)";

uint32_t PadFor(uint32_t payload_length) { return (4 - (payload_length & 3)) & 3; }

bool FrameAddressesOf(const transport::Endpoint& src, const transport::Endpoint& dst,
                      uint8_t traffic_class, wire::FrameAddresses* out) {
  if (src.gid.IsV4Mapped() != dst.gid.IsV4Mapped()) return false;  // no wire form
  if (src.gid.IsV4Mapped()) {
    out->src_ip = src.gid.Ipv4();
    out->dst_ip = dst.gid.Ipv4();
  } else {
    out->ipv6 = true;
    std::memcpy(out->src_ip6, src.gid.raw.data(), 16);
    std::memcpy(out->dst_ip6, dst.gid.raw.data(), 16);
  }
  out->src_port = src.port;
  out->dst_port = dst.port;
  out->traffic_class = traffic_class;
  return true;
}

// Live captures, flushed by an exit handler: the process's device is never
// destroyed (Device::Get), so its destructor would not write the tail.
std::mutex g_live_mu;
std::vector<PacketCapture*>* g_live = nullptr;
int g_opened_in_process = 0;
int g_opened_pid = 0;

void FlushAllAtExit() {
  std::lock_guard<std::mutex> lock(g_live_mu);
  if (g_live == nullptr) return;
  for (PacketCapture* c : *g_live) c->Flush();
}

}  // namespace

int64_t CaptureTimestampNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string ExpandCapturePath(std::string_view path_template, int pid, int nth) {
  std::string path;
  for (size_t i = 0; i < path_template.size(); ++i) {
    if (path_template[i] == '%' && i + 1 < path_template.size() && path_template[i + 1] == 'p') {
      path += std::to_string(pid);
      ++i;
    } else {
      path += path_template[i];
    }
  }
  if (nth > 0) {
    const size_t slash = path.rfind('/');
    const size_t dot = path.rfind('.');
    const bool has_extension = dot != std::string::npos && dot > 0 &&
                               (slash == std::string::npos || dot > slash + 1);
    path.insert(has_extension ? dot : path.size(), "-" + std::to_string(nth + 1));
  }
  return path;
}

std::unique_ptr<PacketCapture> PacketCapture::Open(const CaptureSettings& settings,
                                                   std::string_view device,
                                                   std::string_view description,
                                                   std::string* error) {
  int nth;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (g_opened_pid != getpid()) {  // a forked child counts afresh
      g_opened_pid = getpid();
      g_opened_in_process = 0;
    }
    nth = g_opened_in_process++;
  }
  std::unique_ptr<PacketCapture> c(
      new PacketCapture(settings, ExpandCapturePath(settings.path, getpid(), nth),
                        std::string(device), std::string(description)));
  {
    std::lock_guard<std::mutex> lock(c->mu_);
    if (!c->OpenFileLocked()) {
      *error = "cannot create capture file " + c->path_ + ": " + std::strerror(errno);
      return nullptr;
    }
  }
  std::lock_guard<std::mutex> lock(g_live_mu);
  if (g_live == nullptr) {
    g_live = new std::vector<PacketCapture*>();  // leaked: used by the exit handler
    std::atexit(FlushAllAtExit);
  }
  g_live->push_back(c.get());
  return c;
}

PacketCapture::PacketCapture(const CaptureSettings& settings, std::string path,
                             std::string interface_name, std::string description)
    : settings_(settings),
      path_(std::move(path)),
      owner_pid_(getpid()),
      interface_name_(std::move(interface_name)),
      description_(std::move(description)) {
  buffer_.reserve(kFlushBytes + 8192);
}

PacketCapture::~PacketCapture() {
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (g_live != nullptr) std::erase(*g_live, this);
  }
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  if (fd_ >= 0) close(fd_);
}

bool PacketCapture::OpenFileLocked() {
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) return false;
  file_bytes_ = 0;
  wire::pcapng::AppendSectionHeader("softrnic", &buffer_);
  wire::pcapng::AppendInterface(interface_name_, description_, &buffer_);
  file_bytes_ = buffer_.size();
  FlushLocked();
  return true;
}

void PacketCapture::RotateLocked() {
  FlushLocked();
  close(fd_);
  fd_ = -1;
  // path.<files-1> is replaced by the one before it, and so on down to path.
  for (unsigned i = settings_.files - 1; i >= 1; --i) {
    const std::string from = i == 1 ? path_ : path_ + "." + std::to_string(i - 1);
    rename(from.c_str(), (path_ + "." + std::to_string(i)).c_str());
  }
  if (!OpenFileLocked()) {
    stopped_ = true;
    SOFTRNIC_LOG(kWarn, "capture: cannot create %s after rotation (%s); capture stopped",
                 path_.c_str(), std::strerror(errno));
  }
}

void PacketCapture::WriteLocked(Direction direction, std::string_view comment,
                                int64_t timestamp_ns) {
  if (stopped_) {
    ++not_captured_;
    return;
  }
  const int64_t now = CaptureTimestampNs();
  wire::pcapng::PacketRecord r;
  r.timestamp_ns = static_cast<uint64_t>(timestamp_ns);
  r.original_length = static_cast<uint32_t>(frame_.size());
  r.direction = direction;
  r.comment = comment;
  const size_t before = buffer_.size();
  wire::pcapng::AppendPacket(r, frame_, &buffer_);
  const uint64_t block = buffer_.size() - before;
  if (file_bytes_ + block > settings_.max_file_bytes) {
    if (settings_.files <= 1) {
      buffer_.resize(before);
      stopped_ = true;
      ++not_captured_;
      FlushLocked();
      SOFTRNIC_LOG(kInfo, "capture: %s reached %llu bytes; capture stopped (SOFTRNIC_CAPTURE_FILES "
                          "> 1 rotates instead)",
                   path_.c_str(), static_cast<unsigned long long>(settings_.max_file_bytes));
      return;
    }
    // Move the block past the rotation into the next file.
    std::vector<uint8_t> moved(buffer_.begin() + static_cast<long>(before), buffer_.end());
    buffer_.resize(before);
    RotateLocked();
    if (stopped_) {
      ++not_captured_;
      return;
    }
    buffer_.insert(buffer_.end(), moved.begin(), moved.end());
  }
  file_bytes_ += block;
  ++captured_;
  if (buffer_.size() >= kFlushBytes || now - last_flush_ns_ >= kFlushIntervalNs) FlushLocked();
}

void PacketCapture::FlushLocked() {
  if (getpid() != owner_pid_) {
    buffer_.clear();
    return;
  }
  last_flush_ns_ = CaptureTimestampNs();
  size_t done = 0;
  while (done < buffer_.size() && fd_ >= 0) {
    const ssize_t n = write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      SOFTRNIC_LOG(kWarn, "capture: writing %s failed (%s); capture stopped", path_.c_str(),
                   n < 0 ? std::strerror(errno) : "short write");
      stopped_ = true;
      break;
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void PacketCapture::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!buffer_.empty()) FlushLocked();
}

uint64_t PacketCapture::captured() const {
  std::lock_guard<std::mutex> lock(mu_);
  return captured_;
}

uint64_t PacketCapture::not_captured() const {
  std::lock_guard<std::mutex> lock(mu_);
  return not_captured_;
}

void PacketCapture::RecordTx(const transport::TxPacket& p, const transport::Endpoint& src,
                             int64_t sent_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  wire::FrameAddresses a;
  if (p.length < transport::kMinPacketLength || !FrameAddressesOf(src, p.dst, 0, &a) ||
      (p.payload != nullptr && !transport::SplitLayoutValid(p))) {
    ++not_captured_;
    return;
  }
  flat_.resize(p.length - 4);
  transport::FlattenTxPacket(p, flat_.data());
  wire::BuildRoceFrame(a, flat_, {}, 0, &frame_);
  WriteLocked(Direction::kOutbound, {}, sent_ns);
}

void PacketCapture::RecordRx(const transport::RxPacket& p, const transport::Endpoint& dst) {
  std::lock_guard<std::mutex> lock(mu_);
  wire::FrameAddresses a;
  if (p.length < transport::kMinPacketLength ||
      !FrameAddressesOf(p.src, dst, p.traffic_class, &a)) {
    ++not_captured_;
    return;
  }
  wire::BuildRoceFrame(a, {p.data, p.length - 4}, {}, 0, &frame_);
  WriteLocked(Direction::kInbound, {}, CaptureTimestampNs());
}

void PacketCapture::RecordDirect(const DirectOpRecord& op) {
  std::lock_guard<std::mutex> lock(mu_);
  wire::FrameAddresses to_responder, to_requester;
  if (!FrameAddressesOf(op.requester, op.responder, 0, &to_responder) ||
      !FrameAddressesOf(op.responder, op.requester, 0, &to_requester) || op.mtu == 0) {
    ++not_captured_;
    return;
  }
  uint8_t head[64];
  // One packet: its headers from `f`, `payload` after them.
  auto emit = [&](const wire::FrameAddresses& a, const PacketFields& f,
                  std::span<const uint8_t> payload, Direction direction, const char* comment) {
    const uint32_t n = static_cast<uint32_t>(payload.size());
    const uint32_t head_length = WritePacketHeaders(f, n, head);
    wire::BuildRoceFrame(a, {head, head_length}, payload, PadFor(n), &frame_);
    WriteLocked(direction, comment, CaptureTimestampNs());
  };
  auto data_at = [&](uint32_t offset, uint32_t n) -> std::span<const uint8_t> {
    return op.data != nullptr ? std::span<const uint8_t>(op.data + offset, n)
                              : std::span<const uint8_t>();
  };
  const uint32_t packets = std::max<uint32_t>(1, (op.length + op.mtu - 1) / op.mtu);
  auto psn_at = [&](uint32_t i) { return (op.psn + i) & 0xFFFFFF; };
  // The packets by position, from the opcode tables (wr_opcode.h); IBA 9.4:
  // the first packet of a message carries the RETH (WRITE) or the READ
  // response's AETH, and the builder writes the headers the opcode has.
  auto opcode_at = [&](const MessageOpcodes& m, uint32_t i) { return m.At(i == 0, i + 1 == packets); };
  const WrOpcodeInfo* row = op.op;

  PacketFields f;
  f.va = op.va;
  f.rkey = op.rkey;
  f.dma_length = op.length;
  if (row != nullptr && row->remote_right == kRemoteWrite && !row->consumes_recv_wqe) {
    // RDMA WRITE, and ATOMIC WRITE (one packet of 8 bytes, its own opcode);
    // WRITE with immediate never goes direct (it consumes a receive WQE).
    f.dest_qpn = op.responder_qpn;
    for (uint32_t i = 0; i < packets; ++i) {
      f.opcode = opcode_at(row->rc, i);
      f.psn = psn_at(i);
      f.ack_req = i + 1 == packets;
      const uint32_t off = i * op.mtu;
      emit(to_responder, f, data_at(off, std::min(op.mtu, op.length - off)), Direction::kOutbound,
           kDirectRequestComment);
    }
    PacketFields ack;
    ack.opcode = wire::op::kRcAck;
    ack.dest_qpn = op.requester_qpn;
    ack.psn = psn_at(packets - 1);
    ack.syndrome = wire::kAckSyndromeNoCredit;
    emit(to_requester, ack, {}, Direction::kInbound, kDirectResponseComment);
  } else if (row != nullptr && row->read) {
    f.opcode = row->rc.only;
    f.dest_qpn = op.responder_qpn;
    f.psn = psn_at(0);
    f.ack_req = true;
    emit(to_responder, f, {}, Direction::kOutbound, kDirectRequestComment);
    PacketFields r;
    r.dest_qpn = op.requester_qpn;
    r.syndrome = wire::kAckSyndromeNoCredit;
    for (uint32_t i = 0; i < packets; ++i) {
      r.opcode = opcode_at(kRcReadResponses, i);
      r.psn = psn_at(i);
      const uint32_t off = i * op.mtu;
      emit(to_requester, r, data_at(off, std::min(op.mtu, op.length - off)), Direction::kInbound,
           kDirectResponseComment);
    }
  } else if (row != nullptr && row->atomic) {
    f.opcode = row->rc.only;
    f.dest_qpn = op.responder_qpn;
    f.psn = psn_at(0);
    f.ack_req = true;
    // AtomicETH (IBA 9.3.4): Swap (or Add) Data, then Compare Data.
    const bool cmp_swap = f.opcode == wire::op::kRcCompareSwap;
    f.swap_add = cmp_swap ? op.swap : op.compare_add;
    f.compare = cmp_swap ? op.compare_add : 0;
    emit(to_responder, f, {}, Direction::kOutbound, kDirectRequestComment);
    PacketFields a;
    a.opcode = wire::op::kRcAtomicAck;
    a.dest_qpn = op.requester_qpn;
    a.psn = psn_at(0);
    a.syndrome = wire::kAckSyndromeNoCredit;
    a.atomic_orig = op.atomic_orig;
    emit(to_requester, a, {}, Direction::kInbound, kDirectResponseComment);
  } else {
    ++not_captured_;
  }
}

}  // namespace softrnic::engine
