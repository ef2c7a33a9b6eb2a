// Which of QP1's send buffers the CM may copy its next MAD into.
//
// QP1 has `slots` send buffers, one per entry of its send queue, used in
// turn. The queue completes in order, so the buffer of post N is free again
// once post N - slots has completed. A slot is handed out only while one is
// free, and the turn advances only when the post succeeded: a post that
// failed (ENOMEM with the queue full) never lets a later MAD overwrite the
// buffer of a SEND still waiting to go out (security review L7: the slot
// counter used to advance before the post, so after a failed post the next
// send reused the buffer of a queued one).
#pragma once

#include <cstdint>

namespace softrnic::rdmacm {

class SendSlots {
 public:
  explicit SendSlots(uint32_t slots) : slots_(slots) {}

  // The buffer the next post may use, or -1 while every buffer belongs to a
  // SEND not yet completed.
  int Free() const { return posted_ - done_ < slots_ ? int(posted_ % slots_) : -1; }
  // The post that used Free() succeeded.
  void Posted() { ++posted_; }
  // A send completion (any status) arrived.
  void Completed() {
    if (done_ < posted_) ++done_;
  }

  uint64_t posted() const { return posted_; }
  uint64_t done() const { return done_; }

 private:
  uint64_t slots_;
  uint64_t posted_ = 0, done_ = 0;
};

}  // namespace softrnic::rdmacm
