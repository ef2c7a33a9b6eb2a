// Fixture of softrnic_verbs_tests: a context opened through the real verbs
// entry points (ibv_get_device_list, ibv_open_device) on the fake Device
// (fake_device.h), with a PD and a CQ, and helpers to make QPs.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <vector>

#include "fake_device.h"

namespace softrnic::verbs_test {

class VerbsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake().Reset();
    ctx_ = OpenContext();
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
  }

  void TearDown() override {
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    // Every test destroys what it made: the verbs layer must have asked the
    // engine to destroy every object it created.
    EXPECT_EQ(fake().LiveObjects(), 0u);
    EXPECT_FALSE(fake().device_alive());
  }

  static Fake& fake() { return Fake::Get(); }

  static ibv_context* OpenContext() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n != 1) return nullptr;
    ibv_context* ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    return ctx;
  }

  ibv_qp* CreateQp(ibv_qp_type type = IBV_QPT_RC, ibv_srq* srq = nullptr) {
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.srq = srq;
    init.qp_type = type;
    init.cap.max_send_wr = 8;
    init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 4;
    init.cap.max_inline_data = 64;
    return ibv_create_qp(pd_, &init);
  }

  ibv_qp* CreateQpEx(ibv_qp_type type, uint64_t send_ops_flags) {
    ibv_qp_init_attr_ex init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = type;
    init.cap.max_send_wr = 8;
    init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 4;
    init.cap.max_inline_data = 64;
    init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    init.pd = pd_;
    init.send_ops_flags = send_ops_flags;
    return ibv_create_qp_ex(ctx_, &init);
  }

  ibv_ah* CreateAh() {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.port_num = 1;
    attr.grh.dgid.raw[10] = attr.grh.dgid.raw[11] = 0xff;
    attr.grh.dgid.raw[15] = 9;
    return ibv_create_ah(pd_, &attr);
  }

  // What the engine received from the QP's posts so far.
  static const std::vector<PostedSend>& Sends(ibv_qp* qp) { return fake().QpOf(qp)->sends; }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

inline ibv_sge Sge(uint64_t addr, uint32_t length, uint32_t lkey) { return ibv_sge{addr, length, lkey}; }

}  // namespace softrnic::verbs_test
