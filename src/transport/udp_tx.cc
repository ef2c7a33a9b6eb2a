#include "transport/udp_tx.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "log/log.h"
#include "transport/udp_transport.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103  // Linux >= 5.0
#endif

namespace softrnic::transport {
int UdpSender::Send(const TxPacket* packets, int n) {
  pending_ = 0;
  packets_ = 0;
  iovs_ = 0;
  const int max_segments = segmentation_ && !gso_refused_ ? kMaxSegments : 1;
  const size_t nlocals = main_of_local_->size();
  uint32_t last_length = 0;
  for (int i = 0; i < n; ++i) {
    const TxPacket& p = packets[i];
    if (p.data == nullptr || p.length < kMinPacketLength || p.length > kUdpMaxPayload ||
        p.local_index >= nlocals || p.dst.port == 0 ||
        (p.payload != nullptr && (p.icrc_included || !SplitLayoutValid(p)))) {
      ++counters_->tx_errors;  // malformed request: consumed, never retried
      continue;
    }
    const uint16_t sock = (*main_of_local_)[p.local_index];
    const LocalSocket& s = (*sockets_)[sock];
    // An IPv4 socket sends to IPv4 addresses only, an IPv6 (V6ONLY) one to
    // IPv6 addresses only: a GID pair of two families has no wire form.
    if (s.endpoint.gid.IsV4Mapped() != p.dst.gid.IsV4Mapped()) {
      ++counters_->tx_errors;
      continue;
    }
    Msg* m = pending_ > 0 ? &msgs_[pending_ - 1] : nullptr;
    // A packet joins the open run when it goes the same way, is not larger
    // than the run's segment size, every earlier packet of the run had
    // exactly that size (the kernel cuts at segment_size; only the last
    // segment may be shorter), the datagram stays within UDP's limit, and
    // its ICRC is still to be framed for its place in the run.
    const bool join = m != nullptr && sock_ == sock && m->to == p.dst &&
                      p.length <= m->segment_size &&
                      last_length == m->segment_size && m->packets < max_segments &&
                      m->bytes + p.length <= kUdpMaxPayload && packets_ < kMaxTxBatch &&
                      !p.icrc_included;
    if (!join) {
      if (pending_ > 0 &&
          (sock_ != sock || pending_ == kMaxTxBatch || packets_ == kMaxTxBatch)) {
        int consumed = n;
        if (!Flush(&consumed)) return consumed;
      }
      m = &msgs_[pending_++];
      m->to = p.dst;
      // A link-local destination is reached through the interface of the
      // (link-local) address sending to it.
      m->dst_len = ToSockaddr(p.dst, s.scope_id, &m->dst);
      m->first_packet = i;
      m->packets = 0;
      m->first_iov = iovs_;
      m->iovs = 0;
      m->bytes = 0;
      m->segment_size = static_cast<uint16_t>(p.length);
      sock_ = sock;
    }
    // The kernel only reads iov_base for a send; the const_casts never lead
    // to a write.
    if (p.icrc_included) {
      iov_[iovs_++] = iovec{const_cast<uint8_t*>(p.data), p.length};
    } else {
      // The ICRC for exactly the headers the kernel will emit for this
      // segment: its IPv4 ID is its index in the run (see
      // DatagramSplitter::CheckSegmentIcrc).
      const wire::IpUdpFields ip =
          IcrcFields(s.endpoint, p.dst, static_cast<uint16_t>(m->packets));
      const uint32_t tail = FrameIcrc(ip, p, tail_[packets_]);
      if (p.payload == nullptr) {
        iov_[iovs_++] = iovec{const_cast<uint8_t*>(p.data), p.length - 4};
      } else {
        // In pieces: the payload goes from the application's memory straight
        // into the kernel's copy; the pad bytes travel with the ICRC.
        iov_[iovs_++] = iovec{const_cast<uint8_t*>(p.data), p.head_length};
        if (p.payload_length > 0)
          iov_[iovs_++] = iovec{const_cast<uint8_t*>(p.payload), p.payload_length};
      }
      iov_[iovs_++] = iovec{tail_[packets_], tail};
    }
    m->iovs = iovs_ - m->first_iov;
    ++packets_;
    ++m->packets;
    m->bytes += p.length;
    last_length = p.length;
  }
  int consumed = n;
  if (pending_ > 0) (void)Flush(&consumed);
  return consumed;
}

bool UdpSender::Flush(int* consumed) {
  for (int k = 0; k < pending_; ++k) {
    Msg& m = msgs_[k];
    msghdr& h = hdrs_[k].msg_hdr;
    h.msg_name = &m.dst;
    h.msg_namelen = m.dst_len;
    h.msg_iov = &iov_[m.first_iov];
    h.msg_iovlen = static_cast<size_t>(m.iovs);
    h.msg_flags = 0;
    if (m.packets > 1) {
      h.msg_control = m.cmsg;
      h.msg_controllen = sizeof(m.cmsg);
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      std::memcpy(CMSG_DATA(c), &m.segment_size, sizeof(uint16_t));
    } else {
      h.msg_control = nullptr;
      h.msg_controllen = 0;
    }
  }
  const int fd = (*sockets_)[sock_].fd;
  int off = 0;
  bool ok = true;
  while (off < pending_) {
    const int r = sendmmsg(fd, hdrs_ + off, static_cast<unsigned>(pending_ - off), MSG_DONTWAIT);
    if (r > 0) {
      for (int k = off; k < off + r; ++k) {
        counters_->tx_packets += static_cast<uint64_t>(msgs_[k].packets);
        counters_->tx_bytes += hdrs_[k].msg_len;
      }
      off += r;
      continue;
    }
    const int err = r < 0 ? errno : EAGAIN;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
      // Socket buffer full: never block; the caller offers the rest again.
      ++counters_->tx_busy;
      *consumed = msgs_[off].first_packet;
      ok = false;
      break;
    }
    if (msgs_[off].packets > 1 && (err == EINVAL || err == EIO || err == EOPNOTSUPP)) {
      // A kernel (or route: xfrm, UDP-Lite) without UDP segmentation: from
      // now on one packet per datagram. This run is lost like on a lossy
      // wire; RC retransmits it.
      if (!gso_refused_)
        SOFTRNIC_LOG(kWarn, "UDP_SEGMENT refused (%s); sending packet by packet (slower)",
                     std::strerror(err));
      gso_refused_ = true;
    }
    // A hard error for this one datagram (EMSGSIZE beyond the path MTU with
    // DF, EHOSTUNREACH, EPERM from a firewall...): drop it like a lossy wire.
    counters_->tx_errors += static_cast<uint64_t>(msgs_[off].packets);
    ++off;
  }
  pending_ = 0;
  packets_ = 0;
  iovs_ = 0;
  return ok;
}

}  // namespace softrnic::transport
