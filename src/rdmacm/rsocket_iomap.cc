// rsockets' remote I/O mappings: riomap, riounmap, riowrite (rdma/rsocket.h).
//
// riomap registers a buffer for remote writes and announces it to the peer
// with a SEND with immediate kRsCtlIomap (offset, address, rkey, length);
// riounmap withdraws it with kRsCtlIounmap before deregistering, so the peer
// forgets the mapping instead of finding out through a remote access error
// that kills the connection. riowrite is an RDMA WRITE into the peer's
// announced mapping. The receive side is in rsocket_wire.cc.
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/rsocket_internal.h"

namespace softrnic::rsocket {
namespace {

// Takes a free send slot, waiting for send completions unless non-blocking.
int TakeSendSlot(RSocket* s, bool nb) {
  int waits = 0;
  for (;;) {
    ReapSend(s);
    if (s->reset) return -ECONNRESET;
    if (!s->free_send.empty()) {
      int slot = s->free_send.back();
      s->free_send.pop_back();
      return slot;
    }
    CheckCm(s);
    if (s->disconnected) return -EPIPE;
    if (nb) return -EAGAIN;
    WaitSendSlot(s, &waits);
  }
}

// Sends a mapping message (kRsCtlIomap / kRsCtlIounmap); 0 or an errno.
int SendMapMessage(RSocket* s, uint32_t imm, const LocalMap& m) {
  int slot = TakeSendSlot(s, false);
  if (slot < 0) return -slot;
  RsIomapWire w{m.offset, m.addr, m.len, m.mr->rkey, 0};
  std::memcpy(SlotBuf(s, slot), &w, sizeof w);
  ibv_sge sge{reinterpret_cast<uintptr_t>(SlotBuf(s, slot)), uint32_t(sizeof w), s->mr->lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = uint64_t(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  if (int rc = ibv_post_send(s->id->qp, &wr, &bad)) {
    s->free_send.push_back(slot);
    return rc;
  }
  return 0;
}

}  // namespace
}  // namespace softrnic::rsocket

using namespace softrnic::rsocket;

// riomap: buf becomes writable by the peer's riowrite at [offset, offset+len)
// (offset -1: the next free offset). Only PROT_WRITE mappings exist. The
// ranges of one socket may not overlap, and a socket has at most
// kRsMaxPeerMaps of them (ENOMEM): the peer refuses more (rsocket_wire.h).
RS_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  (void)flags;
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  if (s->st != RsState::kConnected) return Err(ENOTCONN);
  if (!(prot & PROT_WRITE) || !buf || !len || (offset < 0 && offset != off_t(-1)))
    return Err(EINVAL);
  std::lock_guard<std::mutex> l(s->mu);
  LocalMap m;
  m.offset = offset == off_t(-1) ? s->next_map_off : uint64_t(offset);
  m.addr = reinterpret_cast<uintptr_t>(buf);
  m.len = len;
  if (m.offset + len < m.offset || m.offset + len > uint64_t(INT64_MAX)) return Err(EINVAL);
  for (const LocalMap& o : s->local_maps)
    if (m.offset < o.offset + o.len && o.offset < m.offset + m.len) return Err(EINVAL);
  if (s->local_maps.size() >= kRsMaxPeerMaps) return Err(ENOMEM);
  m.mr = ibv_reg_mr(s->id->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!m.mr) return -1;
  if (int e = SendMapMessage(s, kRsCtlIomap, m)) {
    ibv_dereg_mr(m.mr);
    return Err(e);
  }
  s->next_map_off = std::max(s->next_map_off, m.offset + len);
  s->local_maps.push_back(m);
  return off_t(m.offset);
}

// riounmap: tells the peer (so that its next riowrite there fails with
// EINVAL or waits for a new mapping instead of resetting the connection),
// then deregisters. A riowrite of the peer already in flight may still
// reach the region until the deregistration: the application must not
// reuse the buffer before riounmap returns.
RS_EXPORT int riounmap(int socket, void* buf, size_t len) {
  (void)len;
  RSocket* s = Find(socket);
  if (!s) return Err(EBADF);
  std::lock_guard<std::mutex> l(s->mu);
  for (auto it = s->local_maps.begin(); it != s->local_maps.end(); ++it) {
    if (it->addr == reinterpret_cast<uintptr_t>(buf)) {
      // Best effort: on a connection that is gone there is nobody to tell.
      if (s->st == RsState::kConnected && !s->disconnected)
        (void)SendMapMessage(s, kRsCtlIounmap, *it);
      ibv_dereg_mr(it->mr);
      s->local_maps.erase(it);
      return 0;
    }
  }
  return Err(EINVAL);
}

// riowrite: RDMA WRITE of up to 64 KiB into the peer's mapping at `offset`;
// returns the bytes written (the caller loops, as with rsend). Waits for the
// peer's riomap announcement if it has not arrived yet.
RS_EXPORT size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  RSocket* s = Find(socket);
  if (!s) {
    errno = EBADF;
    return size_t(-1);
  }
  std::lock_guard<std::mutex> l(s->mu);
  if (s->st != RsState::kConnected) {
    errno = ENOTCONN;
    return size_t(-1);
  }
  bool nb = s->nonblock || (flags & MSG_DONTWAIT);
  const RsPeerMap* m;
  for (;;) {
    ReapRecv(s);
    if (s->reset) {
      errno = ECONNRESET;
      return size_t(-1);
    }
    m = FindPeerMap(s->peer_maps, uint64_t(offset));
    if (m) break;
    CheckCm(s);
    if (s->disconnected) {
      errno = EPIPE;
      return size_t(-1);
    }
    if (nb) {
      errno = EAGAIN;
      return size_t(-1);
    }
    WaitRecv(s, 10);
  }
  size_t n = std::min({count, kSlot, size_t(m->offset + m->len - uint64_t(offset))});
  const uint64_t remote_addr = m->addr + (uint64_t(offset) - m->offset);
  const uint32_t rkey = m->rkey;
  int slot = TakeSendSlot(s, nb);
  if (slot < 0) {
    errno = -slot;
    return size_t(-1);
  }
  if (n > 0) std::memcpy(SlotBuf(s, slot), buf, n);
  ibv_sge sge{reinterpret_cast<uintptr_t>(SlotBuf(s, slot)), uint32_t(n), s->mr->lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = uint64_t(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  if (int rc = ibv_post_send(s->id->qp, &wr, &bad)) {
    s->free_send.push_back(slot);
    errno = rc;
    return size_t(-1);
  }
  return n;
}
