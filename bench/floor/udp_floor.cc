// udp_floor - what the kernel's UDP path alone costs on this machine, with
// the datagrams softrnic sends, so that bench/run_bench.sh can put softrnic's
// figures next to the floor they stand on, measured in the same run.
//
//   udp_floor pingpong [--pattern single|req-ack] [--iters N] [--pin A,B]
//     Two processes ping-pong over loopback UDP, busy-polling recvmmsg and
//     sending with sendmmsg, as softrnic's polling application does.
//     single:  one 40-byte datagram per trip (an RDMA WRITE of 8 B: BTH,
//              RETH, 8 B, ICRC);
//     req-ack: the request plus a 20-byte ACK in one GSO datagram, what
//              softrnic sends per trip of ib_write_lat with delayed ACKs.
//     Prints "one_way_us typical=<median> avg=<mean> p99=<p99> p999=<p99.9>"
//     (half round trips, like perftest's t_typical; p99 and p99.9 are the
//     sorted samples at index n*99/100 and n*999/1000).
//
//   udp_floor stream [--work copy|crc|crc-place] [--seconds S] [--pin A,B]
//     One-way stream of 64 KiB messages cut into softrnic's 4096-byte-MTU
//     packets (12-byte BTH + 4096 B + 4-byte ICRC), sent with UDP GSO from a
//     source buffer (no copy in user space) and received with UDP GRO, with a
//     window of 16 messages returned by small credit datagrams.
//     copy:      no user-space work per packet (the kernel's copies only);
//     crc:       + a CRC-32 over each packet at both ends (ISA-L, the kernel
//                softrnic's ICRC uses);
//     crc-place: + the receiver copies each payload into a destination
//                buffer, as softrnic's responder places an RDMA WRITE.
//     Prints "gbps=<payload GB/s> cpu_ms_per_gb=<user+sys of both / GB>".
//
// Not a softrnic component: no engine, no verbs; only the wire library's
// CRC. Bound to 127.0.0.1, the sockets get kernel-chosen ports.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "wire/icrc.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kRequestBytes = 40;  // BTH 12 + RETH 16 + 8 B + ICRC 4
constexpr uint32_t kAckBytes = 20;      // BTH 12 + AETH 4 + ICRC 4
constexpr uint32_t kMtu = 4096;
constexpr uint32_t kHead = 12;                      // BTH
constexpr uint32_t kPacket = kHead + kMtu + 4;      // + ICRC
constexpr uint32_t kMessage = 65536;
constexpr uint32_t kPacketsPerMessage = kMessage / kMtu;
constexpr uint32_t kSegmentsPerDatagram = 65507 / kPacket;  // UDP payload limit
constexpr uint32_t kWindowMessages = 16;
constexpr uint32_t kCreditEvery = 4;  // messages per credit datagram
constexpr uint8_t kEndMark = 0xEE;

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

struct Options {
  std::string mode;
  std::string pattern = "single";
  std::string work = "copy";
  int iters = 100000;
  double seconds = 2.0;
  int cpu[2] = {-1, -1};  // [0]: the measuring side, [1]: its peer
};

Options Parse(int argc, char** argv) {
  Options o;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: udp_floor pingpong [--pattern single|req-ack] [--iters N] [--pin A,B]\n"
                 "       udp_floor stream [--work copy|crc|crc-place] [--seconds S] [--pin A,B]\n");
    std::exit(2);
  }
  o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--pattern") o.pattern = v;
    else if (k == "--work") o.work = v;
    else if (k == "--iters") o.iters = std::max(1000, std::atoi(v));
    else if (k == "--seconds") o.seconds = std::max(0.2, std::atof(v));
    else if (k == "--pin" && std::sscanf(v, "%d,%d", &o.cpu[0], &o.cpu[1]) == 2) {}
    else {
      std::fprintf(stderr, "udp_floor: bad option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if ((o.mode != "pingpong" && o.mode != "stream") ||
      (o.pattern != "single" && o.pattern != "req-ack") ||
      (o.work != "copy" && o.work != "crc" && o.work != "crc-place")) {
    std::fprintf(stderr, "udp_floor: unknown mode, pattern or work\n");
    std::exit(2);
  }
  return o;
}

void Pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) Die("sched_setaffinity");
}

struct Socket {
  int fd = -1;
  sockaddr_in addr{};
};

// A stream socket blocks in receive for up to `timeout_ms` (0: never
// blocks), so the stream's CPU figures count work, not polling.
Socket Open(bool gro, int timeout_ms = 0) {
  Socket s;
  s.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | (timeout_ms == 0 ? SOCK_NONBLOCK : 0), 0);
  if (s.fd < 0) Die("socket");
  if (timeout_ms > 0) {
    const timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    if (setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) Die("SO_RCVTIMEO");
  }
  const int one = 1;
  const int buf = 8 << 20;
  (void)setsockopt(s.fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
  (void)setsockopt(s.fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
  if (gro && setsockopt(s.fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) != 0) Die("UDP_GRO");
  s.addr.sin_family = AF_INET;
  s.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s.fd, reinterpret_cast<sockaddr*>(&s.addr), sizeof(s.addr)) != 0) Die("bind");
  socklen_t len = sizeof(s.addr);
  if (getsockname(s.fd, reinterpret_cast<sockaddr*>(&s.addr), &len) != 0) Die("getsockname");
  return s;
}

// One sendmmsg of one datagram made of `iov`, GSO-cut at `segment` when
// non-zero. Retries while the socket buffer is full.
void Send(int fd, const sockaddr_in& to, iovec* iov, size_t niov, uint16_t segment) {
  mmsghdr h{};
  h.msg_hdr.msg_name = const_cast<sockaddr_in*>(&to);
  h.msg_hdr.msg_namelen = sizeof(to);
  h.msg_hdr.msg_iov = iov;
  h.msg_hdr.msg_iovlen = niov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint16_t))];
  if (segment != 0) {
    h.msg_hdr.msg_control = control;
    h.msg_hdr.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&h.msg_hdr);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
  }
  while (sendmmsg(fd, &h, 1, 0) != 1) {
    if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) Die("sendmmsg");
  }
}

// One received datagram: its bytes in the caller's buffer, its header
// (for the UDP_GRO cmsg) here.
struct Datagram {
  iovec iov{};
  alignas(cmsghdr) char control[64];
  mmsghdr h{};
};

// One recvmmsg of one datagram into buf (flags: MSG_DONTWAIT, or 0 to block
// up to SO_RCVTIMEO); returns its length, or -1 when none came.
int ReceiveOnce(int fd, uint8_t* buf, size_t cap, int flags, Datagram* d) {
  d->iov = iovec{buf, cap};
  d->h = mmsghdr{};
  d->h.msg_hdr.msg_iov = &d->iov;
  d->h.msg_hdr.msg_iovlen = 1;
  d->h.msg_hdr.msg_control = d->control;
  d->h.msg_hdr.msg_controllen = sizeof(d->control);
  if (recvmmsg(fd, &d->h, 1, flags, nullptr) == 1) return static_cast<int>(d->h.msg_len);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) Die("recvmmsg");
  return -1;
}

// Busy-polls for one datagram; returns its length.
uint32_t Receive(int fd, uint8_t* buf, size_t cap) {
  Datagram d;
  for (;;) {
    const int n = ReceiveOnce(fd, buf, cap, MSG_DONTWAIT, &d);
    if (n >= 0) return static_cast<uint32_t>(n);
  }
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// ------------------------------------------------------------- ping-pong
int PingPong(const Options& o) {
  const bool req_ack = o.pattern == "req-ack";
  Socket a = Open(req_ack), b = Open(req_ack);
  std::vector<uint8_t> out(kRequestBytes + kAckBytes, 0x5a);
  // One GSO datagram: the request, then the (shorter) ACK as the last
  // segment, as softrnic's transport joins them.
  const uint16_t segment = req_ack ? kRequestBytes : 0;
  const size_t total = req_ack ? kRequestBytes + kAckBytes : kRequestBytes;
  const int warmup = 2000;
  const pid_t child = fork();
  if (child < 0) Die("fork");
  if (child == 0) {  // the echoing side
    Pin(o.cpu[1]);
    std::vector<uint8_t> in(65536);
    for (int i = 0; i < warmup + o.iters; ++i) {
      (void)Receive(b.fd, in.data(), in.size());
      iovec iov{out.data(), total};
      Send(b.fd, a.addr, &iov, 1, segment);
    }
    _exit(0);
  }
  Pin(o.cpu[0]);
  std::vector<uint8_t> in(65536);
  std::vector<double> half_rtt;
  half_rtt.reserve(static_cast<size_t>(o.iters));
  for (int i = 0; i < warmup + o.iters; ++i) {
    const auto t0 = Clock::now();
    iovec iov{out.data(), total};
    Send(a.fd, b.addr, &iov, 1, segment);
    const uint32_t got = Receive(a.fd, in.data(), in.size());
    const auto t1 = Clock::now();
    if (got != total) {
      std::fprintf(stderr, "udp_floor: got %u bytes, want %zu\n", got, total);
      return 1;
    }
    if (i >= warmup) half_rtt.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
  }
  int status = 0;
  waitpid(child, &status, 0);
  double sum = 0;
  for (double v : half_rtt) sum += v;
  std::sort(half_rtt.begin(), half_rtt.end());
  std::printf("one_way_us typical=%.3f avg=%.3f p99=%.3f p999=%.3f iters=%d pattern=%s\n",
              half_rtt[half_rtt.size() / 2], sum / static_cast<double>(half_rtt.size()),
              half_rtt[half_rtt.size() * 99 / 100], half_rtt[half_rtt.size() * 999 / 1000], o.iters,
              o.pattern.c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

// ------------------------------------------------------------- stream
struct Credit {
  uint64_t bytes;  // payload bytes received so far
};

uint32_t PacketCrc(const uint8_t* head, const uint8_t* payload) {
  const uint32_t c = softrnic::wire::Crc32(0, head, kHead);
  return softrnic::wire::Crc32(c, payload, kMtu);
}

// The receiving side: counts payload, returns credits, does `work`. Ends at
// the sender's end mark (or after 1 s of silence); writes its byte count
// and CPU seconds to `report_fd`.
void StreamReceiver(const Options& o, const Socket& me, const sockaddr_in& sender, int report_fd) {
  Pin(o.cpu[1]);
  const bool crc = o.work != "copy";
  const bool place = o.work == "crc-place";
  std::vector<uint8_t> buf(65536);
  std::vector<uint8_t> destination(kMessage * kWindowMessages);
  uint64_t bytes = 0, credited = 0, bad = 0;
  uint32_t sink = 0;  // the copy-only run still reads each payload's first byte
  const double cpu0 = CpuSeconds();
  auto last = Clock::now();
  Datagram d;
  for (;;) {
    const int got = ReceiveOnce(me.fd, buf.data(), buf.size(), 0, &d);  // blocks (SO_RCVTIMEO)
    if (got < 0) {
      if (Clock::now() - last > std::chrono::seconds(1)) break;
      continue;
    }
    last = Clock::now();
    const uint32_t len = static_cast<uint32_t>(got);
    if (len == 1 && buf[0] == kEndMark) break;
    uint32_t segment = len;
    msghdr& h = d.h.msg_hdr;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int size = 0;
        std::memcpy(&size, CMSG_DATA(c), sizeof(size));
        if (size > 0) segment = static_cast<uint32_t>(size);
      }
    }
    for (uint32_t off = 0; off + kPacket <= len; off += segment) {
      const uint8_t* p = buf.data() + off;
      if (crc) {
        uint32_t want;
        std::memcpy(&want, p + kHead + kMtu, 4);
        if (PacketCrc(p, p + kHead) != want) ++bad;
      }
      if (place) {
        uint32_t index;  // the packet's index in the window, from its "BTH"
        std::memcpy(&index, p, 4);
        std::memcpy(destination.data() + (index % (kPacketsPerMessage * kWindowMessages)) * kMtu,
                    p + kHead, kMtu);
      } else {
        sink += p[kHead];
      }
      bytes += kMtu;
    }
    if (bytes - credited >= uint64_t{kCreditEvery} * kMessage) {
      credited = bytes;
      const Credit c{bytes};
      iovec ci{const_cast<Credit*>(&c), sizeof(c)};
      Send(me.fd, sender, &ci, 1, 0);
    }
  }
  asm volatile("" : : "r"(sink));  // keep the reads
  const double report[3] = {static_cast<double>(bytes), CpuSeconds() - cpu0,
                            static_cast<double>(bad)};
  (void)!write(report_fd, report, sizeof(report));
}

int Stream(const Options& o) {
  Socket tx = Open(false, 5), rx = Open(true, 100);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) Die("pipe");
  const pid_t child = fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    close(pipe_fds[0]);
    StreamReceiver(o, rx, tx.addr, pipe_fds[1]);
    _exit(0);
  }
  close(pipe_fds[1]);
  Pin(o.cpu[0]);
  const bool crc = o.work != "copy";
  // The source: a window of messages, as an application's registered buffer.
  std::vector<uint8_t> source(size_t{kMessage} * kWindowMessages, 0x33);
  std::vector<uint8_t> heads(size_t{kHead} * kPacketsPerMessage);
  std::vector<uint32_t> icrcs(kPacketsPerMessage);
  std::vector<iovec> iov(3 * kPacketsPerMessage);
  uint64_t sent = 0, acked = 0, message = 0, stalls = 0;
  const double cpu0 = CpuSeconds();
  usleep(100000);  // the receiver is polling by now
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.seconds);
  auto waited_since = Clock::time_point{};
  while (Clock::now() < end) {
    Credit c{};
    while (recv(tx.fd, &c, sizeof(c), MSG_DONTWAIT) == sizeof(c)) acked = std::max(acked, c.bytes);
    if (sent - acked >= uint64_t{kWindowMessages} * kMessage) {
      // Window full: wait (blocking, up to 5 ms) for a credit. A credit
      // datagram lost (or the receiver far behind): after 5 ms give the
      // window back, as a retransmission timer would.
      if (waited_since == Clock::time_point{}) waited_since = Clock::now();
      if (recv(tx.fd, &c, sizeof(c), 0) == sizeof(c)) {
        acked = std::max(acked, c.bytes);
      } else if (Clock::now() - waited_since > std::chrono::milliseconds(5)) {
        acked = sent;
        ++stalls;
      }
      continue;
    }
    waited_since = Clock::time_point{};
    const uint8_t* msg = source.data() + (message % kWindowMessages) * kMessage;
    for (uint32_t k = 0; k < kPacketsPerMessage; ++k) {
      uint8_t* head = heads.data() + size_t{k} * kHead;
      const uint32_t index = static_cast<uint32_t>((message % kWindowMessages) * kPacketsPerMessage + k);
      std::memcpy(head, &index, 4);
      const uint8_t* payload = msg + size_t{k} * kMtu;
      icrcs[k] = crc ? PacketCrc(head, payload) : 0;
      iov[3 * k] = iovec{head, kHead};
      iov[3 * k + 1] = iovec{const_cast<uint8_t*>(payload), kMtu};
      iov[3 * k + 2] = iovec{&icrcs[k], 4};
    }
    // As many whole packets per GSO datagram as UDP allows, the rest next.
    for (uint32_t first = 0; first < kPacketsPerMessage; first += kSegmentsPerDatagram) {
      const uint32_t n = std::min(kSegmentsPerDatagram, kPacketsPerMessage - first);
      Send(tx.fd, rx.addr, &iov[3 * first], 3 * n, n > 1 ? kPacket : 0);
    }
    sent += kMessage;
    ++message;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const uint8_t mark = kEndMark;
  for (int i = 0; i < 3; ++i) {
    iovec mi{const_cast<uint8_t*>(&mark), 1};
    Send(tx.fd, rx.addr, &mi, 1, 0);
  }
  const double cpu_self = CpuSeconds() - cpu0;
  double report[3] = {0, 0, 0};
  if (read(pipe_fds[0], report, sizeof(report)) != sizeof(report)) Die("receiver report");
  waitpid(child, nullptr, 0);
  const double gb = report[0] / 1e9;
  std::printf("gbps=%.3f cpu_ms_per_gb=%.1f work=%s sent_gb=%.3f stalls=%lu crc_errors=%.0f\n",
              gb / elapsed, gb > 0 ? (cpu_self + report[1]) * 1000 / gb : 0.0, o.work.c_str(),
              static_cast<double>(sent) / 1e9, static_cast<unsigned long>(stalls), report[2]);
  return report[2] == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  return o.mode == "pingpong" ? PingPong(o) : Stream(o);
}
