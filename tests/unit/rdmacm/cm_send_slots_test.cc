// QP1's send-buffer turns (src/rdmacm/cm_send_slots.h, security review L7):
// a buffer is never handed out while the SEND that used it is queued, and a
// failed post does not use up a turn.
#include "rdmacm/cm_send_slots.h"

#include <gtest/gtest.h>

namespace softrnic::rdmacm {
namespace {

TEST(SendSlotsTest, FullQueueHandsOutNoBufferUntilTheOldestCompletes) {
  SendSlots s(4);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(s.Free(), i);
    s.Posted();
  }
  // Four SENDs queued: the next MAD must not be copied over any of them.
  EXPECT_EQ(s.Free(), -1);
  s.Completed();  // the oldest (buffer 0) went out
  EXPECT_EQ(s.Free(), 0);
}

TEST(SendSlotsTest, FailedPostKeepsItsTurn) {
  SendSlots s(4);
  s.Posted();                // buffer 0 queued
  ASSERT_EQ(s.Free(), 1);    // copy into buffer 1 ... and the post fails
  EXPECT_EQ(s.Free(), 1);    // the next attempt gets buffer 1 again
  for (int i = 0; i < 3; ++i) s.Posted();  // buffers 1, 2, 3
  EXPECT_EQ(s.Free(), -1);   // not buffer 0, still queued
}

TEST(SendSlotsTest, WrapsAroundAndIgnoresExtraCompletions) {
  SendSlots s(2);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(s.Free(), i % 2);
    s.Posted();
    s.Completed();
  }
  s.Completed();  // a completion with nothing outstanding changes nothing
  EXPECT_EQ(s.done(), s.posted());
  EXPECT_EQ(s.Free(), 0);
}

}  // namespace
}  // namespace softrnic::rdmacm
