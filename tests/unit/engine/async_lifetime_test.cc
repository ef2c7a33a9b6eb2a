// Issue 14, finding M6 (docs/security.md): an async event never outlives the
// object it names, and a peer cannot grow the async queue without bound.
//
// The kernel's uverbs purges the unread events of a QP, CQ or SRQ when it is
// destroyed; an application that destroys a QP on its error path and then
// reads the event must not be handed the freed object. Here the QP's handle
// is a heap object the test frees after DestroyQp, as libibverbs frees the
// ibv_qp: an event still naming it is the dangling pointer.
#include <poll.h>

#include <cstring>
#include <memory>

#include "engine_test_peer.h"
#include "rc_pair.h"

namespace softrnic::engine::testing {
namespace {

// Whether the fd of the device's own async queue polls readable now.
bool AsyncFdReadable(Device& d) {
  pollfd p{d.async_fd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

void Post(Device& d, AsyncEventType type, void* handle) {
  std::lock_guard lock(d.engine().mu_);
  EngineTestPeer::PostAsyncEvent(d.engine(), type, handle);
}

class AsyncLifetimeTest : public RcPairTest {};

// An R-peer's WRITE to a bad rkey moves our QP to ERR with an access-error
// event; the application destroys the QP, then reads its async events.
TEST_F(AsyncLifetimeTest, DestroyedQpEventIsNotDelivered) {
  Open({});
  auto app_qp = std::make_unique<uint64_t>(0x51DE);  // the application's ibv_qp
  {
    std::lock_guard lock(b_.dev->engine().mu_);
    b_.qp->handle = app_qp.get();
  }
  DrainAsync(*b_.dev);
  Sge s = SgeOf(a_, 0, 512);
  ASSERT_EQ(a_.dev->PostSend(a_.qp, MakeWr(WrOpcode::kRdmaWrite, 1, {&s, 1}, Addr(b_, 0),
                                           b_.dev->MrRkey(b_.mr) ^ 0x00ABCD00)),
            0);
  ASSERT_EQ(PollN(a_, 1).size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return b_.dev->GetQpState(b_.qp) == QpState::kErr; }));
  ASSERT_TRUE(AsyncFdReadable(*b_.dev)) << "no async event for the responder's access error";
  // Another object's event queued behind it must survive the purge.
  int other_object = 0;
  Post(*b_.dev, AsyncEventType::kCqErr, &other_object);
  void* const dead = app_qp.get();
  ASSERT_EQ(b_.dev->DestroyQp(b_.qp), 0);
  b_.qp = nullptr;
  app_qp.reset();
  const std::vector<AsyncEvent> events = DrainAsync(*b_.dev);
  for (const AsyncEvent& ev : events)
    EXPECT_NE(ev.handle, dead) << "async event " << int(ev.type) << " names the destroyed QP (freed)";
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].handle, &other_object);
  EXPECT_FALSE(AsyncFdReadable(*b_.dev)) << "fd readable with no event queued";
}

// The same for a CQ (overrun, IBA 11.4.2.1) and an SRQ (limit reached): their
// unread events go with them, and the fd counts only what is left.
TEST_F(AsyncLifetimeTest, DestroyedCqAndSrqEventsAreNotDelivered) {
  auto dev = MakeDevice(0);
  ASSERT_NE(dev, nullptr);
  Pd* pd = nullptr;
  ASSERT_EQ(dev->AllocPd(nullptr, &pd), 0);
  auto app_cq = std::make_unique<uint64_t>(1);
  auto app_srq = std::make_unique<uint64_t>(2);
  int survivor = 0;
  Cq* cq = nullptr;
  ASSERT_EQ(dev->CreateCq(4, nullptr, app_cq.get(), &cq), 0);
  Srq* srq = nullptr;
  SrqAttr srq_attr;
  srq_attr.max_wr = 4;
  srq_attr.max_sge = 1;
  ASSERT_EQ(dev->CreateSrq(pd, srq_attr, app_srq.get(), &srq), 0);
  DrainAsync(*dev);
  Post(*dev, AsyncEventType::kCqErr, app_cq.get());
  Post(*dev, AsyncEventType::kSrqLimitReached, app_srq.get());
  Post(*dev, AsyncEventType::kPortActive, nullptr);
  Post(*dev, AsyncEventType::kSrqErr, app_srq.get());
  Post(*dev, AsyncEventType::kCqErr, &survivor);
  // The engine's handles are the application's: one it also gave a QP names
  // that QP in a QP event, which the CQ's destroy leaves alone.
  Post(*dev, AsyncEventType::kQpFatal, app_cq.get());
  ASSERT_EQ(dev->DestroyCq(cq), 0);
  ASSERT_EQ(dev->DestroySrq(srq), 0);
  const std::vector<AsyncEvent> events = DrainAsync(*dev);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, AsyncEventType::kPortActive);
  EXPECT_EQ(events[1].handle, &survivor);
  EXPECT_EQ(events[2].type, AsyncEventType::kQpFatal);
  EXPECT_FALSE(AsyncFdReadable(*dev));
}

// A peer that keeps causing errors in an application that never reads async
// events (most do not) must not grow the queue without bound.
TEST_F(AsyncLifetimeTest, QueueIsBounded) {
  auto dev = MakeDevice(0);
  ASSERT_NE(dev, nullptr);
  DrainAsync(*dev);
  int object = 0;
  constexpr int kPosted = 100000;
  for (int i = 0; i < kPosted; ++i) Post(*dev, AsyncEventType::kQpFatal, &object);
  uint64_t dropped = 0;
  {
    std::lock_guard lock(dev->engine().mu_);
    dropped = EngineTestPeer::AsyncEventsDropped(dev->engine(), Device::kDeviceAsyncQueue);
  }
  const std::vector<AsyncEvent> events = DrainAsync(*dev);
  EXPECT_LE(events.size(), 4096u) << "async queue grew without bound";
  EXPECT_EQ(events.size(), AsyncQueue::kMaxEvents);
  EXPECT_EQ(dropped, kPosted - AsyncQueue::kMaxEvents) << "drops not counted";
  // Once read, the queue takes events again.
  Post(*dev, AsyncEventType::kQpFatal, &object);
  EXPECT_EQ(DrainAsync(*dev).size(), 1u);
}

// Events already handed to the application are counted for the destroy,
// which waits for their acknowledgements (ibv_get_async_event(3)); unread
// ones are not.
TEST_F(AsyncLifetimeTest, DestroyReportsEventsHandedOut) {
  auto dev = MakeDevice(0);
  ASSERT_NE(dev, nullptr);
  Pd* pd = nullptr;
  ASSERT_EQ(dev->AllocPd(nullptr, &pd), 0);
  Cq* cq = nullptr;
  int app_cq = 0;
  ASSERT_EQ(dev->CreateCq(4, nullptr, &app_cq, &cq), 0);
  QpCaps caps{1, 1, 1, 1, 0};
  Qp* qp = nullptr;
  int app_qp = 0;
  ASSERT_EQ(dev->CreateQp(pd, QpType::kRc, cq, cq, nullptr, &caps, false, &app_qp, &qp), 0);
  DrainAsync(*dev);
  Post(*dev, AsyncEventType::kQpFatal, &app_qp);
  Post(*dev, AsyncEventType::kCommEst, &app_qp);
  Post(*dev, AsyncEventType::kQpLastWqeReached, &app_qp);
  AsyncEvent ev;
  ASSERT_EQ(dev->GetAsyncEvent(&ev), 0);
  ASSERT_EQ(dev->GetAsyncEvent(&ev), 0);
  uint32_t reported = 99;
  ASSERT_EQ(dev->DestroyQp(qp, &reported), 0);
  EXPECT_EQ(reported, 2u);
  EXPECT_TRUE(DrainAsync(*dev).empty()) << "the third, unread event outlived its QP";
  ASSERT_EQ(dev->DestroyCq(cq, &reported), 0);
  EXPECT_EQ(reported, 0u);
}

}  // namespace
}  // namespace softrnic::engine::testing
