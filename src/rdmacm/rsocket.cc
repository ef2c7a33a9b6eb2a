// The rsockets API librdmacm exports (rdma/rsocket.h), over softrnic's
// rdma_cm and verbs.
//
// A simplified rsockets: SOCK_STREAM over AF_INET only, each rsocket an
// rdma_cm id with an RC QP, data carried as SENDs into a ring of posted
// receive buffers (the RNR retry count is 7, infinite, so a sender simply
// waits while the receiver has no free buffer: flow control without credits).
// A zero-length SEND or the DISCONNECTED event ends the stream. riomap,
// riounmap and riowrite are in rsocket_iomap.cc. What a peer may send, and
// how every receive completion is judged, is in rsocket_wire.h: anything
// else resets the connection (ECONNRESET). Both ends must be this library:
// the wire protocol is not rdma-core's rsockets protocol.
// Not implemented (EOPNOTSUPP): SOCK_DGRAM, out-of-band data. See
// docs/rdmacm.md.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <sched.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "rdmacm/rsocket_internal.h"

namespace softrnic::rsocket {
namespace {

std::mutex g_mu;
std::map<int, RSocket*> g_socks;

}  // namespace

RSocket* Find(int fd) {
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_socks.find(fd);
  return it == g_socks.end() ? nullptr : it->second;
}

int Err(int e) {
  errno = e;
  return -1;
}

namespace {

// Waits for the next CM event on the socket's channel (blocking).
int WaitEvent(RSocket* s, rdma_cm_event_type want) {
  rdma_cm_event* e;
  for (;;) {
    pollfd p{s->ch->fd, POLLIN, 0};
    if (poll(&p, 1, 30000) <= 0) return Err(ETIMEDOUT);
    if (rdma_get_cm_event(s->ch, &e) != 0) {
      if (errno == EAGAIN) continue;
      return -1;
    }
    rdma_cm_event_type t = e->event;
    int status = e->status;
    rdma_ack_cm_event(e);
    if (t == want) return 0;
    if (t == RDMA_CM_EVENT_REJECTED) return Err(ECONNREFUSED);
    if (t == RDMA_CM_EVENT_UNREACHABLE || t == RDMA_CM_EVENT_ADDR_ERROR ||
        t == RDMA_CM_EVENT_ROUTE_ERROR)
      return Err(status < 0 ? -status : EHOSTUNREACH);
    if (t == RDMA_CM_EVENT_CONNECT_ERROR) return Err(ECONNRESET);
    if (t == RDMA_CM_EVENT_DISCONNECTED) {
      s->disconnected = s->eof = true;
      return Err(ECONNRESET);
    }
  }
}

}  // namespace

void CheckCm(RSocket* s) {
  rdma_cm_event* e;
  pollfd p{s->ch->fd, POLLIN, 0};
  while (poll(&p, 1, 0) == 1 && rdma_get_cm_event(s->ch, &e) == 0) {
    if (e->event == RDMA_CM_EVENT_DISCONNECTED) s->disconnected = s->eof = true;
    rdma_ack_cm_event(e);
  }
}

namespace {

int PostRecv(RSocket* s, int slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(SlotBuf(s, slot)), uint32_t(kSlot), s->mr->lkey};
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = uint64_t(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(s->id->qp, &wr, &bad);
}

// QP, buffers and receives of a socket whose id has route / a request.
int SetupQp(RSocket* s) {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = kSendSlots;
  a.cap.max_recv_wr = kRecvSlots;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  if (rdma_create_qp(s->id, nullptr, &a) != 0) return -1;
  size_t sz = kSlot * (kRecvSlots + kSendSlots);
  s->buf = static_cast<uint8_t*>(aligned_alloc(4096, sz));
  if (!s->buf) return Err(ENOMEM);
  s->mr = ibv_reg_mr(s->id->pd, s->buf, sz, IBV_ACCESS_LOCAL_WRITE);
  if (!s->mr) return -1;
  for (int i = 0; i < kRecvSlots; ++i)
    if (int rc = PostRecv(s, i)) return Err(rc);
  for (int i = 0; i < kSendSlots; ++i) s->free_send.push_back(kRecvSlots + i);
  ibv_req_notify_cq(s->id->recv_cq, 0);
  return 0;
}

rdma_conn_param ConnParam() {
  rdma_conn_param p{};
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;  // infinite: a sender waits for the receiver's buffers
  return p;
}

RSocket* NewSock() {
  auto* s = new RSocket;
  s->fd = eventfd(0, EFD_CLOEXEC);
  if (s->fd < 0) {
    delete s;
    return nullptr;
  }
  s->ch = rdma_create_event_channel();
  if (!s->ch) {
    close(s->fd);
    delete s;
    return nullptr;
  }
  std::lock_guard<std::mutex> l(g_mu);
  g_socks[s->fd] = s;
  return s;
}

void FreeSock(RSocket* s) {
  {
    std::lock_guard<std::mutex> l(g_mu);
    g_socks.erase(s->fd);
  }
  if (s->id) {
    if (s->id->qp) rdma_destroy_qp(s->id);
    rdma_destroy_id(s->id);
  }
  for (auto& m : s->local_maps)
    if (m.mr) ibv_dereg_mr(m.mr);
  if (s->mr) ibv_dereg_mr(s->mr);
  free(s->buf);
  if (s->ch) rdma_destroy_event_channel(s->ch);
  close(s->fd);
  delete s;
}

// The peer broke the protocol: no more of its bytes are looked at, and the
// connection is torn down (the peer sees DISCONNECTED).
void ProtocolViolation(RSocket* s) {
  if (s->reset) return;
  s->reset = s->eof = true;
  if (!s->disconnected) {
    s->disconnected = true;
    rdma_disconnect(s->id);
  }
}

}  // namespace

int ReapRecv(RSocket* s) {
  ibv_wc wc[16];
  int n, total = 0;
  while (!s->reset && (n = ibv_poll_cq(s->id->recv_cq, 16, wc)) > 0) {
    for (int i = 0; i < n && !s->reset; ++i) {
      const int slot = int(wc[i].wr_id);  // ours: the slot PostRecv gave
      RsCompletion c;
      c.success = wc[i].status == IBV_WC_SUCCESS;
      c.recv = wc[i].opcode == IBV_WC_RECV;
      c.rdma_with_imm = wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM;
      c.with_imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
      c.imm = ntohl(wc[i].imm_data);
      c.byte_len = wc[i].byte_len;
      const RsRecvEvent ev = ClassifyRecv(c, SlotBuf(s, slot), kSlot);
      switch (ev.kind) {
        case RsRecvKind::kFlushed:
          s->eof = true;
          break;
        case RsRecvKind::kData:
          s->rx.emplace_back(slot, ev.length);
          ++total;
          break;
        case RsRecvKind::kEof:
          s->rx.emplace_back(slot, 0);
          ++total;
          break;
        case RsRecvKind::kIomap:
        case RsRecvKind::kIounmap:
          if (!ApplyPeerMapEvent(s->peer_maps, ev)) {
            ProtocolViolation(s);
            break;
          }
          PostRecv(s, slot);
          break;
        case RsRecvKind::kProtocolError:
          ProtocolViolation(s);
          break;
      }
    }
  }
  return total;
}

void ReapSend(RSocket* s) {
  ibv_wc wc[16];
  int n;
  while ((n = ibv_poll_cq(s->id->send_cq, 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      s->free_send.push_back(int(wc[i].wr_id));
      // A failed send (retries exhausted, QP in error): the connection is
      // gone; blocked calls return EPIPE / end of stream instead of waiting.
      if (wc[i].status != IBV_WC_SUCCESS) s->disconnected = s->eof = true;
    }
  }
}

namespace {

bool Readable(RSocket* s) {
  if (s->st == RsState::kListen) {
    pollfd p{s->ch->fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  if (s->st != RsState::kConnected) return false;
  ReapRecv(s);
  if (!s->rx.empty()) return true;
  CheckCm(s);
  return s->eof;
}

bool Writable(RSocket* s) {
  if (s->st != RsState::kConnected) return false;
  ReapSend(s);
  CheckCm(s);
  return !s->free_send.empty() || s->disconnected;
}

}  // namespace

namespace {

// Takes and acknowledges one event of a CQ channel if one is ready.
void TakeCqEvent(ibv_comp_channel* ch) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return;
  ibv_cq* cq;
  void* ctx;
  if (ibv_get_cq_event(ch, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
}

// Sleeps (at most ms) until the CQ channel `ch` or the socket's CM channel
// has news; takes the CQ event. The caller armed the CQ and looked at it
// once more after the arm.
void SleepOnChannels(RSocket* s, ibv_comp_channel* ch, int ms) {
  pollfd p[2] = {{ch->fd, POLLIN, 0}, {s->ch->fd, POLLIN, 0}};
  if (poll(p, 2, ms) > 0 && (p[0].revents & POLLIN)) TakeCqEvent(ch);
}

}  // namespace

void WaitRecv(RSocket* s, int ms) {
  ibv_req_notify_cq(s->id->recv_cq, 0);
  if (ReapRecv(s)) return;
  SleepOnChannels(s, s->id->recv_cq_channel, ms);
}

void WaitSendSlot(RSocket* s, int* waits) {
  // A slot frees up within a round trip while the peer reads: yield a few
  // times first (on 2 vCPUs a blocking wake-up costs ~40 us), then sleep on
  // the send CQ's channel, as rsockets' rs_get_comp does after its polling
  // time. A peer that stopped reading (its receive slots full, our SENDs
  // RNR-retried) then costs this thread nothing.
  if (++*waits <= kSendSpins) {
    sched_yield();
    return;
  }
  ibv_req_notify_cq(s->id->send_cq, 0);
  const size_t before = s->free_send.size();
  ReapSend(s);  // completions that came before the arm raise no event
  if (s->free_send.size() > before) return;
  SleepOnChannels(s, s->id->send_cq_channel, 100);
}

namespace {

ssize_t DoSend(RSocket* s, const void* data, size_t len, int flags) {
  if (s->st != RsState::kConnected) return Err(ENOTCONN);
  if (s->reset) return Err(ECONNRESET);
  if (s->wr_shut) return Err(EPIPE);
  bool nb = s->nonblock || (flags & MSG_DONTWAIT);
  size_t done = 0;
  int waits = 0;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (done < len || (len == 0 && done == 0)) {
    ReapSend(s);
    if (s->free_send.empty()) {
      CheckCm(s);
      if (s->disconnected) return done ? ssize_t(done) : Err(EPIPE);
      if (nb) return done ? ssize_t(done) : Err(EAGAIN);
      WaitSendSlot(s, &waits);
      continue;
    }
    waits = 0;
    if (s->disconnected) return done ? ssize_t(done) : Err(EPIPE);
    int slot = s->free_send.back();
    s->free_send.pop_back();
    size_t n = std::min(kSlot, len - done);
    if (n > 0) std::memcpy(SlotBuf(s, slot), p + done, n);  // p may be null when len is 0
    ibv_sge sge{reinterpret_cast<uintptr_t>(SlotBuf(s, slot)), uint32_t(n), s->mr->lkey};
    ibv_send_wr wr{}, *bad;
    wr.wr_id = uint64_t(slot);
    wr.sg_list = &sge;
    wr.num_sge = n ? 1 : 0;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (int rc = ibv_post_send(s->id->qp, &wr, &bad)) {
      s->free_send.push_back(slot);
      return done ? ssize_t(done) : Err(rc);
    }
    done += n;
    if (len == 0) break;
  }
  return ssize_t(done);
}

ssize_t DoRecv(RSocket* s, void* data, size_t len, int flags) {
  if (s->st != RsState::kConnected) return Err(ENOTCONN);
  bool nb = s->nonblock || (flags & MSG_DONTWAIT);
  uint8_t* out = static_cast<uint8_t*>(data);
  size_t got = 0;
  for (;;) {
    ReapRecv(s);
    while (!s->rx.empty() && got < len) {
      auto& [slot, blen] = s->rx.front();
      if (blen == 0) {  // EOF marker
        s->eof = true;
        s->rx.pop_front();
        PostRecv(s, slot);
        break;
      }
      size_t n = std::min(len - got, size_t(blen) - s->rx_off);
      if (n > 0) std::memcpy(out + got, SlotBuf(s, slot) + s->rx_off, n);
      got += n;
      if (flags & MSG_PEEK) return ssize_t(got);
      s->rx_off += n;
      if (s->rx_off == blen) {
        s->rx_off = 0;
        int sl = slot;
        s->rx.pop_front();
        PostRecv(s, sl);
      }
    }
    if (got && !(flags & MSG_WAITALL)) return ssize_t(got);
    if (got == len) return ssize_t(got);
    // Data received before a protocol violation is delivered, then the error.
    if (s->reset && s->rx.empty()) return got ? ssize_t(got) : Err(ECONNRESET);
    if (s->eof) return ssize_t(got);
    CheckCm(s);
    if (s->eof && s->rx.empty() && !ReapRecv(s)) return ssize_t(got);
    if (nb) return got ? ssize_t(got) : Err(EAGAIN);
    WaitRecv(s, 100);
  }
}

// Waits (at most 2 s) until every posted send has completed, so that data
// and the EOF marker are on the wire before the QP leaves RTS.
void DrainSends(RSocket* s) {
  for (int i = 0; i < 2000 && s->free_send.size() < size_t(kSendSlots); ++i) {
    ReapSend(s);
    if (s->free_send.size() >= size_t(kSendSlots)) break;
    CheckCm(s);
    if (s->disconnected) break;
    struct timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

// rdma_disconnect after the sends drained, then wait (at most 1 s) for the
// DISCONNECTED event, i.e. for the peer's DREP (or DREQ).
void Disconnect(RSocket* s) {
  if (s->disconnected) return;
  DrainSends(s);
  if (rdma_disconnect(s->id) != 0) return;
  for (int i = 0; i < 100 && !s->disconnected; ++i) {
    pollfd p{s->ch->fd, POLLIN, 0};
    if (poll(&p, 1, 10) == 1) CheckCm(s);
  }
  s->disconnected = true;
}

}  // namespace
}  // namespace softrnic::rsocket

using namespace softrnic::rsocket;

RS_EXPORT int rsocket(int domain, int type, int protocol) {
  (void)protocol;
  if (domain != AF_INET) return Err(EAFNOSUPPORT);
  int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (base != SOCK_STREAM) return Err(EOPNOTSUPP);  // datagram rsockets: not implemented
  RSocket* s = NewSock();
  if (!s) return -1;
  if (rdma_create_id(s->ch, &s->id, s, RDMA_PS_TCP) != 0) {
    int e = errno;
    FreeSock(s);
    return Err(e);
  }
  s->nonblock = type & SOCK_NONBLOCK;
  return s->fd;
}

RS_EXPORT int rbind(int socket, const struct sockaddr* addr, socklen_t) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  if (rdma_bind_addr(s->id, const_cast<sockaddr*>(addr)) != 0) return -1;
  s->st = RsState::kBound;
  return 0;
}

RS_EXPORT int rlisten(int socket, int backlog) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  if (rdma_listen(s->id, backlog) != 0) return -1;
  s->st = RsState::kListen;
  return 0;
}

RS_EXPORT int raccept(int socket, struct sockaddr* addr, socklen_t* addrlen) {
  RSocket* l = Find(socket);
  if (!l) return Err(EBADF);
  if (l->st != RsState::kListen) return Err(EINVAL);
  rdma_cm_event* e = nullptr;
  for (;;) {
    pollfd p{l->ch->fd, POLLIN, 0};
    int r = poll(&p, 1, l->nonblock ? 0 : -1);
    if (r == 0) return Err(EAGAIN);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (rdma_get_cm_event(l->ch, &e) != 0) return -1;
    if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) break;
    rdma_ack_cm_event(e);
  }
  rdma_cm_id* cid = e->id;
  rdma_ack_cm_event(e);
  RSocket* s = NewSock();
  if (!s) {
    rdma_reject(cid, nullptr, 0);
    rdma_destroy_id(cid);
    return Err(ENOMEM);
  }
  s->id = cid;
  cid->context = s;
  rdma_conn_param cp = ConnParam();
  if (rdma_migrate_id(cid, s->ch) != 0 || SetupQp(s) != 0 || rdma_accept(cid, &cp) != 0 ||
      WaitEvent(s, RDMA_CM_EVENT_ESTABLISHED) != 0) {
    int err = errno;
    FreeSock(s);
    return Err(err ? err : ECONNABORTED);
  }
  s->st = RsState::kConnected;
  if (addr && addrlen) {
    socklen_t n = std::min<socklen_t>(*addrlen, sizeof(sockaddr_in));
    std::memcpy(addr, &cid->route.addr.dst_sin, n);
    *addrlen = sizeof(sockaddr_in);
  }
  return s->fd;
}

RS_EXPORT int rconnect(int socket, const struct sockaddr* addr, socklen_t) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  if (!addr || addr->sa_family != AF_INET) return Err(EAFNOSUPPORT);
  if (s->st == RsState::kConnected) return Err(EISCONN);
  // Connection set-up is synchronous even on a non-blocking rsocket.
  if (rdma_resolve_addr(s->id, nullptr, const_cast<sockaddr*>(addr), 2000) != 0 ||
      WaitEvent(s, RDMA_CM_EVENT_ADDR_RESOLVED) != 0 || rdma_resolve_route(s->id, 2000) != 0 ||
      WaitEvent(s, RDMA_CM_EVENT_ROUTE_RESOLVED) != 0)
    return -1;
  if (!s->id->qp && SetupQp(s) != 0) return -1;
  rdma_conn_param cp = ConnParam();
  if (rdma_connect(s->id, &cp) != 0 || WaitEvent(s, RDMA_CM_EVENT_ESTABLISHED) != 0) return -1;
  s->st = RsState::kConnected;
  return 0;
}

RS_EXPORT int rshutdown(int socket, int how) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  if (s->st != RsState::kConnected) return Err(ENOTCONN);
  if ((how == SHUT_WR || how == SHUT_RDWR) && !s->wr_shut) {
    DoSend(s, nullptr, 0, 0);  // EOF marker
    s->wr_shut = true;
  }
  if (how == SHUT_RDWR) Disconnect(s);
  return 0;
}

RS_EXPORT int rclose(int socket) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  if (s->st == RsState::kConnected) {
    if (!s->wr_shut && !s->disconnected) DoSend(s, nullptr, 0, 0);
    Disconnect(s);
  }
  FreeSock(s);
  return 0;
}

RS_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  std::lock_guard<std::mutex> l(s->mu);
  return DoRecv(s, buf, len, flags);
}
RS_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, struct sockaddr* src,
                            socklen_t* srclen) {
  if (src && srclen) *srclen = 0;
  return rrecv(socket, buf, len, flags);
}
RS_EXPORT ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  std::lock_guard<std::mutex> l(s->mu);
  if (len == 0) return 0;
  return DoSend(s, buf, len, flags);
}
RS_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const struct sockaddr*,
                          socklen_t) {
  return rsend(socket, buf, len, flags);
}
RS_EXPORT ssize_t rread(int socket, void* buf, size_t count) { return rrecv(socket, buf, count, 0); }
RS_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  return rsend(socket, buf, count, 0);
}
RS_EXPORT ssize_t rreadv(int socket, const struct iovec* iov, int iovcnt) {
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    ssize_t n = rrecv(socket, iov[i].iov_base, iov[i].iov_len, total ? MSG_DONTWAIT : 0);
    if (n < 0) return total ? total : n;
    total += n;
    if (size_t(n) < iov[i].iov_len) break;
  }
  return total;
}
RS_EXPORT ssize_t rwritev(int socket, const struct iovec* iov, int iovcnt) {
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    ssize_t n = rsend(socket, iov[i].iov_base, iov[i].iov_len, 0);
    if (n < 0) return total ? total : n;
    total += n;
  }
  return total;
}
RS_EXPORT ssize_t rrecvmsg(int socket, struct msghdr* msg, int flags) {
  (void)flags;
  return rreadv(socket, msg->msg_iov, int(msg->msg_iovlen));
}
RS_EXPORT ssize_t rsendmsg(int socket, const struct msghdr* msg, int flags) {
  (void)flags;
  return rwritev(socket, msg->msg_iov, int(msg->msg_iovlen));
}

RS_EXPORT int rpoll(struct pollfd* fds, nfds_t nfds, int timeout) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  std::vector<pollfd> real;
  for (;;) {
    int ready = 0;
    real.clear();
    for (nfds_t i = 0; i < nfds; ++i) {
      fds[i].revents = 0;
      RSocket* s = Find(fds[i].fd);
      if (!s) {
        real.push_back(fds[i]);
        continue;
      }
      std::lock_guard<std::mutex> l(s->mu);
      if ((fds[i].events & POLLIN) && Readable(s)) fds[i].revents |= POLLIN;
      if ((fds[i].events & POLLOUT) && Writable(s)) fds[i].revents |= POLLOUT;
      if (s->st == RsState::kConnected && s->disconnected) fds[i].revents |= POLLHUP;
      if (fds[i].revents) ++ready;
    }
    if (!real.empty()) {
      int r = poll(real.data(), real.size(), 0);
      if (r < 0) return -1;
      for (nfds_t i = 0, j = 0; i < nfds; ++i) {
        if (Find(fds[i].fd)) continue;
        fds[i].revents = real[j++].revents;
        if (fds[i].revents) ++ready;
      }
    }
    if (ready || timeout == 0) return ready;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long el = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (timeout > 0 && el >= timeout) return 0;
    // Wait briefly on the underlying fds (real fds and CM/CQ channels).
    std::vector<pollfd> w;
    for (nfds_t i = 0; i < nfds; ++i) {
      RSocket* s = Find(fds[i].fd);
      if (!s) {
        w.push_back({fds[i].fd, fds[i].events, 0});
        continue;
      }
      w.push_back({s->ch->fd, POLLIN, 0});
      if (s->st != RsState::kConnected) continue;
      if (s->id->recv_cq_channel) {
        ibv_req_notify_cq(s->id->recv_cq, 0);
        w.push_back({s->id->recv_cq_channel->fd, POLLIN, 0});
      }
      // POLLOUT: a send completion frees a slot.
      if ((fds[i].events & POLLOUT) && s->id->send_cq_channel) {
        ibv_req_notify_cq(s->id->send_cq, 0);
        w.push_back({s->id->send_cq_channel->fd, POLLIN, 0});
      }
    }
    // Completions that came before an arm raise no event: look again.
    bool news = false;
    for (nfds_t i = 0; i < nfds && !news; ++i) {
      RSocket* s = Find(fds[i].fd);
      if (!s) continue;
      std::lock_guard<std::mutex> l(s->mu);
      news = ((fds[i].events & POLLIN) && Readable(s)) ||
             ((fds[i].events & POLLOUT) && Writable(s));
    }
    if (news) continue;
    const int ms = timeout < 0 ? 10 : int(std::min<long>(10, timeout - el));
    if (poll(w.data(), w.size(), ms) > 0) {
      for (nfds_t i = 0; i < nfds; ++i) {
        RSocket* s = Find(fds[i].fd);
        if (!s || s->st != RsState::kConnected) continue;
        for (ibv_comp_channel* ch : {s->id->recv_cq_channel, s->id->send_cq_channel})
          if (ch != nullptr) TakeCqEvent(ch);
      }
    }
  }
}

RS_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                      struct timeval* timeout) {
  std::vector<pollfd> p;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (ev) p.push_back({fd, ev, 0});
  }
  int ms = timeout ? int(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  int r = rpoll(p.data(), p.size(), ms);
  if (r < 0) return r;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  int n = 0;
  for (auto& x : p) {
    if (readfds && (x.revents & (POLLIN | POLLHUP))) FD_SET(x.fd, readfds), ++n;
    if (writefds && (x.revents & POLLOUT)) FD_SET(x.fd, writefds), ++n;
  }
  return n;
}

RS_EXPORT int rgetpeername(int socket, struct sockaddr* addr, socklen_t* addrlen) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  // A NULL addr with *addrlen 0 asks for the size only (rdma-core's
  // librspreload does so before it falls back to a kernel socket).
  if (!addrlen || (!addr && *addrlen > 0)) return Err(EFAULT);
  socklen_t n = std::min<socklen_t>(*addrlen, sizeof(sockaddr_in));
  if (n > 0) std::memcpy(addr, &s->id->route.addr.dst_sin, n);
  *addrlen = sizeof(sockaddr_in);
  return 0;
}
RS_EXPORT int rgetsockname(int socket, struct sockaddr* addr, socklen_t* addrlen) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  // A NULL addr with *addrlen 0 asks for the size only (rdma-core's
  // librspreload does so before it falls back to a kernel socket).
  if (!addrlen || (!addr && *addrlen > 0)) return Err(EFAULT);
  socklen_t n = std::min<socklen_t>(*addrlen, sizeof(sockaddr_in));
  if (n > 0) std::memcpy(addr, &s->id->route.addr.src_sin, n);
  *addrlen = sizeof(sockaddr_in);
  return 0;
}

// Socket options are accepted (buffer sizes, TCP_NODELAY, keepalive, the
// SOL_RDMA tuning options) and have no effect; SO_ERROR reads 0.
RS_EXPORT int rsetsockopt(int socket, int, int, const void*, socklen_t) {
  return Find(socket) ? 0 : Err(EBADF);
}
RS_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  if (!Find(socket)) return Err(EBADF);
  if (!optval || !optlen || *optlen < sizeof(int)) return Err(EINVAL);
  int v = 0;
  if (level == SOL_SOCKET && (optname == SO_SNDBUF || optname == SO_RCVBUF))
    v = int(kSlot) * kRecvSlots;
  std::memcpy(optval, &v, sizeof v);
  *optlen = sizeof v;
  return 0;
}

RS_EXPORT int rfcntl(int socket, int cmd, ...) {
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  va_list ap;
  va_start(ap, cmd);
  int r = 0;
  if (cmd == F_GETFL) {
    r = O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
  } else if (cmd == F_SETFL) {
    int fl = va_arg(ap, int);
    s->nonblock = fl & O_NONBLOCK;
  } else {
    r = Err(EINVAL);
  }
  va_end(ap);
  return r;
}
