// What rsocket.cc (the stream: connect, send, receive, poll) and
// rsocket_iomap.cc (riomap / riounmap / riowrite) share: the socket and the
// helpers both sides of the API use. Not part of any public interface.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "rdmacm/rsocket_wire.h"

#define RS_EXPORT extern "C" __attribute__((visibility("default")))

namespace softrnic::rsocket {

inline constexpr int kRecvSlots = 32;
inline constexpr int kSendSlots = 16;
// Yields before a blocked send sleeps on the send CQ's channel.
inline constexpr int kSendSpins = 64;
inline constexpr size_t kSlot = kRsSlot;

enum class RsState { kNew, kBound, kListen, kConnected, kClosed };

struct LocalMap {  // a riomap of ours
  uint64_t offset = 0, addr = 0, len = 0;
  ibv_mr* mr = nullptr;
};

struct RSocket {
  int fd = -1;  // the number handed to the application (an eventfd)
  RsState st = RsState::kNew;
  bool nonblock = false;
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* buf = nullptr;
  std::deque<std::pair<int, uint32_t>> rx;  // (slot, length) received, not consumed
  size_t rx_off = 0;                        // consumed bytes of rx.front()
  std::vector<int> free_send;
  bool eof = false;  // peer sent EOF or disconnected
  bool disconnected = false;
  bool wr_shut = false;
  // The peer broke the protocol (rsocket_wire.h): the connection is torn
  // down; reads return what was received before, then ECONNRESET.
  bool reset = false;
  std::vector<LocalMap> local_maps;
  std::vector<RsPeerMap> peer_maps;
  uint64_t next_map_off = 0;
  std::mutex mu;
};

RSocket* Find(int fd);
int Err(int e);
inline uint8_t* SlotBuf(RSocket* s, int slot) { return s->buf + size_t(slot) * kSlot; }
// Non-blocking check of CM events on a connected socket.
void CheckCm(RSocket* s);
// Moves receive completions into s->rx (and mapping messages into
// s->peer_maps); returns how many stream events it queued.
int ReapRecv(RSocket* s);
void ReapSend(RSocket* s);
// Sleeps until the socket's receive CQ or CM channel has news (ms: -1 forever).
void WaitRecv(RSocket* s, int ms);
// A blocking send found no free slot: yields the first kSendSpins times
// (*waits counts them), then sleeps (at most 100 ms) until a send
// completion or a CM event.
void WaitSendSlot(RSocket* s, int* waits);

}  // namespace softrnic::rsocket
