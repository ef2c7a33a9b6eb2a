// Device discovery, contexts, queries and async events (device.cc,
// async_acks.h): what a context asks of the engine, how engine attributes
// become ibv_device_attr / ibv_port_attr / GID entries, how async events are
// routed to the context that made their object, translated, acknowledged,
// and how destroy waits for the acknowledgement (ibv_get_async_event(3)).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "verbs_fixture.h"

// IBVERBS_PRIVATE_34 (device.cc); rdma-core declares it in its private
// driver.h only.
extern "C" int ibv_query_gid_type(ibv_context* ctx, uint8_t port, unsigned int index, int* type);

namespace softrnic::verbs_test {
namespace {

using DeviceTest = VerbsTest;
using eng::AsyncEvent;
using eng::AsyncEventType;

TEST(DeviceOpenTest, ContextsOwnAnAsyncQueueAndShareTheDevice) {
  Fake& f = Fake::Get();
  f.Reset();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(list[1], nullptr);
  EXPECT_STREQ(ibv_get_device_name(list[0]), "softrnic0");
  EXPECT_EQ(list[0]->transport_type, IBV_TRANSPORT_IB);
  EXPECT_EQ(ibv_get_device_index(list[0]), 0);

  ibv_context* a = ibv_open_device(list[0]);
  ibv_context* b = ibv_open_device(list[0]);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(f.OpenQueues(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(a->async_fd, Fake::AsyncFdOf(1));
  EXPECT_EQ(b->async_fd, Fake::AsyncFdOf(2));
  // Each context's cmd_fd is a descriptor of its own (verbs/import.cc).
  EXPECT_GE(a->cmd_fd, 0);
  EXPECT_NE(a->cmd_fd, b->cmd_fd);
  // A dup of it imports the device; any other descriptor does not.
  const int dup_fd = dup(a->cmd_fd);
  ibv_context* imported = ibv_import_device(dup_fd);
  ASSERT_NE(imported, nullptr);
  EXPECT_EQ(imported->cmd_fd, dup_fd);
  EXPECT_EQ(imported->device, list[0]);
  EXPECT_EQ(f.OpenQueues(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ibv_close_device(imported), 0);
  EXPECT_EQ(fcntl(dup_fd, F_GETFD), -1);  // the imported context owned it
  errno = 0;
  EXPECT_EQ(ibv_import_device(0), nullptr);  // stdin: not a softrnic context's
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(ibv_import_device(-1), nullptr);
  EXPECT_NE(f.router(), nullptr);
  // The inline data-path wrappers of verbs.h find the ops.
  EXPECT_NE(a->ops.post_send, nullptr);
  EXPECT_NE(a->ops.poll_cq, nullptr);
  EXPECT_NE(verbs_get_ctx_op(a, create_qp_ex), nullptr);
  EXPECT_NE(verbs_get_ctx_op(a, query_port), nullptr);

  EXPECT_EQ(ibv_close_device(a), 0);
  EXPECT_EQ(f.OpenQueues(), (std::vector<int>{0, 2}));
  EXPECT_TRUE(f.device_alive());
  EXPECT_EQ(ibv_close_device(b), 0);
  EXPECT_FALSE(f.device_alive());  // the last context let go of the engine

  // No engine: ibv_open_device fails with ENODEV; a queue that cannot be
  // opened fails it with that errno.
  f.get_fails = true;
  errno = 0;
  EXPECT_EQ(ibv_open_device(list[0]), nullptr);
  EXPECT_EQ(errno, ENODEV);
  f.get_fails = false;
  f.FailCall("OpenAsyncQueue", EMFILE);
  EXPECT_EQ(ibv_open_device(list[0]), nullptr);
  EXPECT_EQ(errno, EMFILE);
  EXPECT_FALSE(f.device_alive());
  ibv_device other{};
  EXPECT_EQ(ibv_open_device(&other), nullptr);
  EXPECT_EQ(errno, ENODEV);
  ibv_free_device_list(list);
}

TEST_F(DeviceTest, DeviceAndPortAttributesComeFromTheEngine) {
  ibv_device_attr d;
  ASSERT_EQ(ibv_query_device(ctx_, &d), 0);
  const eng::DeviceAttr& a = fake().attr;
  EXPECT_EQ(d.max_qp, int(a.max_qp));
  EXPECT_EQ(d.max_qp_wr, int(a.max_qp_wr));
  EXPECT_EQ(d.max_sge, int(a.max_sge));
  EXPECT_EQ(d.max_cqe, int(a.max_cqe));
  EXPECT_EQ(d.max_srq_wr, int(a.max_srq_wr));
  EXPECT_EQ(d.max_qp_rd_atom, int(a.max_qp_rd_atom));
  EXPECT_EQ(d.vendor_part_id, a.vendor_part_id);
  // softrnic's own vendor id, by default (issue 15): not 0, which SPDK reads
  // as rxe, nor rxe's 0xffffff.
  EXPECT_EQ(d.vendor_id, a.vendor_id);
  EXPECT_EQ(d.vendor_id, 0x025352u);
  EXPECT_NE(d.vendor_part_id, 0u);
  EXPECT_EQ(d.node_guid, a.node_guid);
  EXPECT_EQ(d.phys_port_cnt, 1);
  EXPECT_EQ(d.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_TRUE(d.device_cap_flags & IBV_DEVICE_RC_RNR_NAK_GEN);
  // Memory windows of both types, type 2 bound to their QP (2B).
  EXPECT_TRUE(d.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(d.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  EXPECT_EQ(d.max_mw, static_cast<int>(a.max_mw));
  EXPECT_STREQ(d.fw_ver, a.fw_ver.c_str());
  // sys_image_guid defaults to the node GUID.
  EXPECT_EQ(d.sys_image_guid, a.node_guid);

  ibv_device_attr_ex dx;
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dx), 0);
  EXPECT_EQ(dx.orig_attr.max_qp, int(a.max_qp));
  EXPECT_EQ(dx.phys_port_cnt_ex, 1u);

  ibv_port_attr p;
  ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(p.active_mtu, IBV_MTU_1024);
  EXPECT_EQ(p.max_mtu, IBV_MTU_4096);
  EXPECT_EQ(p.gid_tbl_len, 2);  // the fake's GID table
  EXPECT_EQ(p.max_msg_sz, a.max_msg_sz);
  EXPECT_EQ(ibv_query_port(ctx_, 0, &p), EINVAL);
  EXPECT_EQ(ibv_query_port(ctx_, 2, &p), EINVAL);
}

// The exported ibv_query_port symbol is the pre-link_layer ABI (the inline
// wrapper calls it only when the context has no query_port op): it must
// write exactly the 48 bytes of that struct.
TEST_F(DeviceTest, LegacyQueryPortWritesOnly48Bytes) {
  unsigned char buf[sizeof(ibv_port_attr) + 16];
  std::memset(buf, 0xab, sizeof(buf));
  ASSERT_EQ((ibv_query_port)(ctx_, 1, reinterpret_cast<_compat_ibv_port_attr*>(buf)), 0);
  ibv_port_attr p;
  std::memcpy(&p, buf, sizeof(p));
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  for (size_t i = 48; i < sizeof(buf); ++i) ASSERT_EQ(buf[i], 0xab) << i;
}

TEST_F(DeviceTest, GidsAndPkeys) {
  ibv_gid gid;
  ASSERT_EQ(ibv_query_gid(ctx_, 1, 1, &gid), 0);
  EXPECT_EQ(std::memcmp(gid.raw, fake().gids[1].raw.data(), 16), 0);
  errno = 0;
  EXPECT_EQ(ibv_query_gid(ctx_, 1, 2, &gid), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_query_gid(ctx_, 1, -1, &gid), -1);
  EXPECT_EQ(ibv_query_gid(ctx_, 2, 0, &gid), -1);

  ibv_gid_entry e;
  ASSERT_EQ(ibv_query_gid_ex(ctx_, 1, 0, &e, 0), 0);
  EXPECT_EQ(std::memcmp(e.gid.raw, fake().gids[0].raw.data(), 16), 0);
  EXPECT_EQ(e.gid_type, uint32_t(IBV_GID_TYPE_ROCE_V2));
  EXPECT_EQ(e.port_num, 1u);
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, 2, &e, 0), ENODATA);
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, 0, &e, 1), EINVAL);

  ibv_gid_entry table[4];
  ASSERT_EQ(ibv_query_gid_table(ctx_, table, 4, 0), 2);
  EXPECT_EQ(table[1].gid_index, 1u);
  EXPECT_EQ(std::memcmp(table[1].gid.raw, fake().gids[1].raw.data(), 16), 0);
  EXPECT_EQ(ibv_query_gid_table(ctx_, table, 1, 0), -EINVAL);  // too small

  int type = -1;
  EXPECT_EQ(ibv_query_gid_type(ctx_, 1, 1, &type), 0);
  EXPECT_EQ(type, 1);  // RoCE v2 in rdma-core's sysfs numbering
  EXPECT_EQ(ibv_query_gid_type(ctx_, 1, 2, &type), -1);

  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
  EXPECT_EQ(pkey, htons(0xffff));
  EXPECT_EQ(ibv_query_pkey(ctx_, 1, 1, &pkey), -1);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htons(0xffff)), 0);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htons(0x7fff)), 0);  // limited member
  errno = 0;
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htons(0x8001)), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htons(0xff7f)), -1);  // byte order matters
}

// Events go to the queue of the context that made their object; device
// events (no object) to the device's own queue.
TEST_F(DeviceTest, AsyncEventsAreRoutedToTheObjectsContext) {
  ibv_context* other = OpenContext();
  ASSERT_NE(other, nullptr);
  ibv_pd* opd = ibv_alloc_pd(other);
  ibv_cq* ocq = ibv_create_cq(other, 4, nullptr, nullptr, 0);
  ASSERT_NE(ocq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = ocq;
  init.qp_type = IBV_QPT_RC;
  ibv_qp* oqp = ibv_create_qp(opd, &init);
  ASSERT_NE(oqp, nullptr);
  ibv_srq_init_attr sinit{};
  sinit.attr.max_wr = 4;
  ibv_srq* srq = ibv_create_srq(pd_, &sinit);
  ASSERT_NE(srq, nullptr);

  auto route = fake().router();
  ASSERT_NE(route, nullptr);
  const int q_ctx = ctx_->async_fd - Fake::AsyncFdOf(0);
  const int q_other = other->async_fd - Fake::AsyncFdOf(0);
  ASSERT_NE(q_ctx, q_other);
  EXPECT_EQ(route(AsyncEvent{AsyncEventType::kQpFatal, oqp, 1}), q_other);
  EXPECT_EQ(route(AsyncEvent{AsyncEventType::kCommEst, oqp, 1}), q_other);
  EXPECT_EQ(route(AsyncEvent{AsyncEventType::kCqErr, ocq, 1}), q_other);
  EXPECT_EQ(route(AsyncEvent{AsyncEventType::kCqErr, cq_, 1}), q_ctx);
  EXPECT_EQ(route(AsyncEvent{AsyncEventType::kSrqLimitReached, srq, 1}), q_ctx);
  EXPECT_EQ(route(AsyncEvent{AsyncEventType::kPortActive, nullptr, 1}),
            eng::Device::kDeviceAsyncQueue);

  EXPECT_EQ(ibv_destroy_qp(oqp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_cq(ocq), 0);
  EXPECT_EQ(ibv_dealloc_pd(opd), 0);
  EXPECT_EQ(ibv_close_device(other), 0);
}

TEST_F(DeviceTest, AsyncEventsAreTranslatedPerKind) {
  ibv_qp* qp = CreateQp();
  ASSERT_NE(qp, nullptr);
  ibv_srq_init_attr sinit{};
  sinit.attr.max_wr = 4;
  ibv_srq* srq = ibv_create_srq(pd_, &sinit);
  ASSERT_NE(srq, nullptr);
  const int q = ctx_->async_fd - Fake::AsyncFdOf(0);
  fake().PushAsyncEvent(q, {AsyncEventType::kQpLastWqeReached, qp, 1});
  fake().PushAsyncEvent(q, {AsyncEventType::kCqErr, cq_, 1});
  fake().PushAsyncEvent(q, {AsyncEventType::kSrqLimitReached, srq, 1});
  fake().PushAsyncEvent(q, {AsyncEventType::kPortErr, nullptr, 1});

  ibv_async_event ev;
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, qp);
  ibv_ack_async_event(&ev);
  EXPECT_EQ(qp->events_completed, 1u);
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, cq_);
  ibv_ack_async_event(&ev);
  EXPECT_EQ(cq_->async_events_completed, 1u);
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  ibv_ack_async_event(&ev);
  EXPECT_EQ(srq->events_completed, 1u);
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
  EXPECT_EQ(ev.element.port_num, 1);
  ibv_ack_async_event(&ev);  // names no object: nothing to count

  // Nothing queued (fd non-blocking, or the object was destroyed since the
  // fd woke the reader): -1 with the engine's errno.
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(ctx_, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(ibv_get_async_event(ctx_, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);

  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// ibv_destroy_qp/cq/srq wait until every async event of the object that the
// application was handed is acknowledged (M6, docs/security.md): the engine
// reports how many were handed out; the verbs layer waits on the object's
// events_completed counter.
template <class Obj, class Destroy>
void ExpectDestroyWaitsForAck(ibv_context* ctx, Obj* obj, AsyncEventType type, Destroy destroy) {
  const int q = ctx->async_fd - Fake::AsyncFdOf(0);
  Fake::Get().PushAsyncEvent(q, {type, obj, 1});
  Fake::Get().PushAsyncEvent(q, {type, obj, 1});
  ibv_async_event ev1, ev2;
  ASSERT_EQ(ibv_get_async_event(ctx, &ev1), 0);
  ASSERT_EQ(ibv_get_async_event(ctx, &ev2), 0);
  ibv_ack_async_event(&ev1);  // one of the two acknowledged before destroy

  std::atomic<bool> done{false};
  int rc = -1;
  std::thread t([&] {
    rc = destroy(obj);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done.load()) << "destroy returned with an event unacknowledged";
  ibv_ack_async_event(&ev2);
  t.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(rc, 0);
}

TEST_F(DeviceTest, DestroyQpWaitsForTheAckOfItsEvents) {
  ibv_qp* qp = CreateQp();
  ASSERT_NE(qp, nullptr);
  ExpectDestroyWaitsForAck(ctx_, qp, AsyncEventType::kQpFatal, [](ibv_qp* o) { return ibv_destroy_qp(o); });
}

TEST_F(DeviceTest, DestroyCqWaitsForTheAckOfItsEvents) {
  ibv_cq* cq = ibv_create_cq(ctx_, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ExpectDestroyWaitsForAck(ctx_, cq, AsyncEventType::kCqErr, [](ibv_cq* o) { return ibv_destroy_cq(o); });
}

TEST_F(DeviceTest, DestroySrqWaitsForTheAckOfItsEvents) {
  ibv_srq_init_attr sinit{};
  sinit.attr.max_wr = 4;
  ibv_srq* srq = ibv_create_srq(pd_, &sinit);
  ASSERT_NE(srq, nullptr);
  ExpectDestroyWaitsForAck(ctx_, srq, AsyncEventType::kSrqErr,
                           [](ibv_srq* o) { return ibv_destroy_srq(o); });
}

// Events never handed out (unread, purged by the engine) are not waited for.
TEST_F(DeviceTest, UnreadEventsDoNotBlockDestroy) {
  ibv_qp* qp = CreateQp();
  ASSERT_NE(qp, nullptr);
  fake().PushAsyncEvent(ctx_->async_fd - Fake::AsyncFdOf(0), {AsyncEventType::kQpFatal, qp, 1});
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

TEST_F(DeviceTest, InitAhFromWcReadsTheIpv4HeaderInTheGrhArea) {
  // A UD receive's 40-byte GRH area with an IPv4 header in bytes 20..39,
  // as the engine writes it (and rxe/mlx5 deliver it).
  unsigned char area[40] = {};
  unsigned char* ip = area + 20;
  ip[0] = 0x45;
  ip[1] = 0x88;  // TOS
  ip[8] = 64;
  ip[9] = 17;
  const uint32_t src = htonl(0x0a000063), dst = htonl(0x0a000002);  // 10.0.0.99 -> gid[1]
  std::memcpy(ip + 12, &src, 4);
  std::memcpy(ip + 16, &dst, 4);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip[10] = static_cast<unsigned char>(~sum >> 8);
  ip[11] = static_cast<unsigned char>(~sum);

  ibv_wc wc{};
  wc.wc_flags = IBV_WC_GRH;
  wc.sl = 2;
  ibv_ah_attr ah;
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, reinterpret_cast<ibv_grh*>(area), &ah), 0);
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(ah.grh.sgid_index, 1);  // the local GID the request was sent to
  EXPECT_EQ(ah.grh.traffic_class, 0x88);
  EXPECT_EQ(ah.grh.dgid.raw[10], 0xff);
  EXPECT_EQ(std::memcmp(&ah.grh.dgid.raw[12], &src, 4), 0);
  EXPECT_EQ(ah.port_num, 1);

  // Addressed to a GID that is not ours.
  const uint32_t elsewhere = htonl(0x0a0000fe);
  std::memcpy(ip + 16, &elsewhere, 4);
  ip[10] = ip[11] = 0;
  sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip[10] = static_cast<unsigned char>(~sum >> 8);
  ip[11] = static_cast<unsigned char>(~sum);
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, reinterpret_cast<ibv_grh*>(area), &ah), ENOENT);
  // A corrupt header is neither IPv4 nor IPv6.
  ip[11] ^= 1;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, reinterpret_cast<ibv_grh*>(area), &ah),
            EPROTONOSUPPORT);
  // Without IBV_WC_GRH there is nothing to read.
  wc.wc_flags = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, nullptr, &ah), 0);
  EXPECT_EQ(ah.is_global, 0);
  EXPECT_EQ(ah.sl, 2);
}

}  // namespace
}  // namespace softrnic::verbs_test
