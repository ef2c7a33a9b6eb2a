// Creating and destroying verbs objects (pd_mr.cc, cq.cc, srq.cc, ah.cc, qp.cc, gsi_private.cc):
// checks made before the engine is called, what the engine is asked for,
// what is reported back, and that a failed destroy leaves the object usable
// (DestroyThenFree) while a failed create leaves nothing behind.
#include "verbs_fixture.h"

// softrnic's private export for its librdmacm (gsi_private.cc).
extern "C" ibv_qp* softrnic_create_gsi_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq,
                                          ibv_qp_cap* cap);

namespace softrnic::verbs_test {
namespace {

using ResourcesTest = VerbsTest;

TEST_F(ResourcesTest, PdFailuresAndBusyDealloc) {
  fake().FailCall("AllocPd", ENOMEM);
  errno = 0;
  EXPECT_EQ(ibv_alloc_pd(ctx_), nullptr);
  EXPECT_EQ(errno, ENOMEM);

  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->context, ctx_);
  eng::Pd* epd = fake().PdOf(pd);
  ASSERT_NE(epd, nullptr);
  // EBUSY from the engine (objects use the PD): the PD stays valid.
  fake().FailCall("DeallocPd", EBUSY);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
  EXPECT_EQ(pd->context, ctx_);  // not freed (ASan would report the read)
  EXPECT_EQ(fake().PdOf(pd), epd);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(fake().PdOf(pd), nullptr);
  EXPECT_EQ(fake().CallCount("DeallocPd"), 2);
}

TEST_F(ResourcesTest, RegMrTranslatesAndReportsKeys) {
  alignas(64) static char buf[256];
  ibv_mr* mr = ibv_reg_mr(pd_, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(mr, nullptr);
  const eng::Mr* e = fake().MrOf(mr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->pd, fake().PdOf(pd_));
  EXPECT_EQ(e->addr, buf);
  EXPECT_EQ(e->length, sizeof(buf));
  EXPECT_EQ(e->iova, reinterpret_cast<uintptr_t>(buf));  // ibv_reg_mr: iova = addr
  EXPECT_EQ(e->access, uint32_t(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(mr->lkey, e->lkey);
  EXPECT_EQ(mr->rkey, e->rkey);
  EXPECT_NE(mr->lkey, mr->rkey);
  EXPECT_EQ(mr->addr, buf);
  EXPECT_EQ(mr->length, sizeof(buf));
  EXPECT_EQ(mr->pd, pd_);
  EXPECT_EQ(mr->context, ctx_);

  ibv_mr* mr2 = ibv_reg_mr_iova(pd_, buf, 64, 0x10000, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr2, nullptr);
  EXPECT_EQ(fake().MrOf(mr2)->iova, 0x10000u);

  // A failed dereg leaves the MR registered and usable.
  fake().FailCall("DeregMr", EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr2), EBUSY);
  EXPECT_EQ(mr2->length, 64u);
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(ResourcesTest, RegMrAccessFlags) {
  static char buf[64];
  // Unknown bits: EINVAL before the engine.
  errno = 0;
  EXPECT_EQ(ibv_reg_mr_iova2(pd_, buf, 64, 0, IBV_ACCESS_LOCAL_WRITE | (1u << 8)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fake().CallCount("RegMr"), 0);
  // IBV_ACCESS_MW_BIND reaches the engine (memory windows are offered).
  ibv_mr* bindable = ibv_reg_mr(pd_, buf, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  ASSERT_NE(bindable, nullptr);
  EXPECT_EQ(fake().MrOf(bindable)->access, uint32_t(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
  EXPECT_EQ(ibv_dereg_mr(bindable), 0);
  // On-demand paging reaches the engine as its access bit (engine/memory/odp.h);
  // implicit ODP as address 0, length SIZE_MAX, iova 0.
  ibv_mr* odp = ibv_reg_mr(pd_, buf, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(odp, nullptr);
  EXPECT_EQ(fake().MrOf(odp)->access, uint32_t(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND));
  ibv_mr* implicit = ibv_reg_mr(pd_, nullptr, SIZE_MAX, IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(implicit, nullptr);
  EXPECT_EQ(fake().MrOf(implicit)->addr, nullptr);
  EXPECT_EQ(fake().MrOf(implicit)->length, SIZE_MAX);
  EXPECT_EQ(fake().MrOf(implicit)->iova, 0u);
  EXPECT_EQ(ibv_dereg_mr(implicit), 0);
  EXPECT_EQ(ibv_dereg_mr(odp), 0);
  EXPECT_EQ(fake().CallCount("RegMr"), 3);

  // Optional hints (RELAXED_ORDERING, which perftest always passes, and
  // HUGETLB) are dropped, not refused, and do not reach the engine.
  ibv_mr* mr = ibv_reg_mr(pd_, buf, 64,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_HUGETLB);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(fake().MrOf(mr)->access, uint32_t(IBV_ACCESS_LOCAL_WRITE));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);

  // REMOTE_WRITE without LOCAL_WRITE is the engine's rule (IBA 10.6.3.1,
  // tested in softrnic_engine_tests); its EINVAL comes back as NULL + errno
  // and nothing stays registered.
  fake().FailCall("RegMr", EINVAL);
  EXPECT_EQ(ibv_reg_mr(pd_, buf, 64, IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fake().CallCount("RegMr"), 5);

  EXPECT_EQ(ibv_reg_mr(nullptr, buf, 64, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(pd_, 0, 64, 0, 3, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(fake().CallCount("RegMr"), 5);
}

// ibv_reg_mr(3): "optional" access flags (IBV_ACCESS_OPTIONAL_RANGE) may be
// ignored by a device that does not support them; every one of them is
// accepted by every registration verb, and none reaches the engine.
TEST_F(ResourcesTest, EveryOptionalAccessFlagIsAcceptedAndIgnored) {
  static char buf[64];
  const unsigned required = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  for (unsigned bit = 0; bit < 32; ++bit) {
    const unsigned flag = 1u << bit;
    if (!(flag & IBV_ACCESS_OPTIONAL_RANGE)) continue;
    ibv_mr* a = ibv_reg_mr(pd_, buf, sizeof(buf), static_cast<int>(required | flag));
    ibv_mr* b = ibv_reg_mr_iova2(pd_, buf, sizeof(buf), 0x1000, required | flag);
    ibv_mr* c = ibv_reg_mr_iova(pd_, buf, sizeof(buf), 0x2000, static_cast<int>(required | flag));
    ASSERT_NE(a, nullptr) << "bit " << bit;
    ASSERT_NE(b, nullptr) << "bit " << bit;
    ASSERT_NE(c, nullptr) << "bit " << bit;
    EXPECT_EQ(fake().MrOf(a)->access, required) << "bit " << bit;
    EXPECT_EQ(fake().MrOf(b)->access, required) << "bit " << bit;
    EXPECT_EQ(fake().MrOf(c)->access, required) << "bit " << bit;
    EXPECT_EQ(ibv_dereg_mr(a), 0);
    EXPECT_EQ(ibv_dereg_mr(b), 0);
    EXPECT_EQ(ibv_dereg_mr(c), 0);
  }
  // All of them at once, as IBV_ACCESS_RELAXED_ORDERING is among them.
  ibv_mr* all = ibv_reg_mr_iova2(pd_, buf, sizeof(buf), 0,
                                 required | IBV_ACCESS_OPTIONAL_RANGE | IBV_ACCESS_RELAXED_ORDERING);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(fake().MrOf(all)->access, required);
  EXPECT_EQ(ibv_dereg_mr(all), 0);
}

// Enhanced connection establishment has no options to negotiate here:
// ibv_query_ece(3) and ibv_set_ece(3) answer EOPNOTSUPP (their return value,
// as rdma-core's verbs do for a provider without ECE), leaving `ece` alone.
TEST_F(ResourcesTest, EceIsNotSupported) {
  ibv_qp* qp = CreateQp(IBV_QPT_RC);
  ASSERT_NE(qp, nullptr);
  ibv_ece ece{};
  ece.vendor_id = 0x1234;
  ece.options = 7;
  EXPECT_EQ(ibv_query_ece(qp, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_set_ece(qp, &ece), EOPNOTSUPP);
  EXPECT_EQ(ece.vendor_id, 0x1234u);
  EXPECT_EQ(ece.options, 7u);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

TEST_F(ResourcesTest, CreateCqChecksAndReportsTheRealSize) {
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx_, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_create_cq(ctx_, -5, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_create_cq(ctx_, 4, nullptr, nullptr, 1), nullptr);  // one comp vector
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fake().CallCount("CreateCq"), 1);  // the fixture's

  // Too large is the engine's check (max_cqe); its errno is the verb's.
  fake().FailCall("CreateCq", EINVAL);
  EXPECT_EQ(ibv_create_cq(ctx_, 1 << 30, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fake().CallCount("CreateCq"), 2);

  fake().cq_extra = 3;
  int context_tag = 0;
  ibv_cq* cq = ibv_create_cq(ctx_, 5, &context_tag, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(fake().CqOf(cq)->requested, 5u);
  EXPECT_EQ(cq->cqe, 8);  // what the engine made, as ibv_create_cq(3) says
  EXPECT_EQ(cq->cq_context, &context_tag);
  EXPECT_EQ(cq->context, ctx_);

  fake().FailCall("ResizeCq", ENOMEM);
  EXPECT_EQ(ibv_resize_cq(cq, 100), ENOMEM);
  EXPECT_EQ(cq->cqe, 8);
  EXPECT_EQ(ibv_resize_cq(cq, 100), 0);
  EXPECT_EQ(cq->cqe, 103);
  EXPECT_EQ(ibv_resize_cq(cq, 0), EINVAL);

  fake().FailCall("DestroyCq", EBUSY);
  EXPECT_EQ(ibv_destroy_cq(cq), EBUSY);
  EXPECT_EQ(cq->cqe, 103);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// A channel is EBUSY while CQs use it (counted in ibv_comp_channel.refcnt,
// as rdma-core does); a CQ names only a channel of its own context.
TEST_F(ResourcesTest, CompletionChannelLifetime) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  EXPECT_EQ(ch->context, ctx_);
  ASSERT_NE(fake().ChannelOfFd(ch->fd), nullptr);

  ibv_context* other = OpenContext();
  ASSERT_NE(other, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(other, 4, nullptr, ch, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ibv_cq* cq1 = ibv_create_cq(ctx_, 4, nullptr, ch, 0);
  ibv_cq* cq2 = ibv_create_cq(ctx_, 4, nullptr, ch, 0);
  ASSERT_NE(cq1, nullptr);
  ASSERT_NE(cq2, nullptr);
  EXPECT_EQ(fake().CqOf(cq1)->channel, fake().ChannelOfFd(ch->fd));
  EXPECT_EQ(ch->refcnt, 2);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
  EXPECT_EQ(fake().CallCount("DestroyCompletionChannel"), 0);
  // A CQ that failed to go keeps its reference.
  fake().FailCall("DestroyCq", EBUSY);
  EXPECT_EQ(ibv_destroy_cq(cq1), EBUSY);
  EXPECT_EQ(ch->refcnt, 2);
  EXPECT_EQ(ibv_destroy_cq(cq1), 0);
  EXPECT_EQ(ch->refcnt, 1);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
  EXPECT_EQ(ibv_destroy_cq(cq2), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
  EXPECT_EQ(ibv_close_device(other), 0);
}

TEST_F(ResourcesTest, CqEventsNameTheCqAndItsContext) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  int tag = 0;
  ibv_cq* cq = ibv_create_cq(ctx_, 4, &tag, ch, 0);
  ASSERT_NE(cq, nullptr);
  auto& events = fake().ChannelOfFd(ch->fd)->events;
  events.push_back(cq);       // the engine's handle is the ibv_cq
  events.push_back(nullptr);  // a CQ destroyed with its event unread
  ibv_cq* got = nullptr;
  void* got_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), 0);
  EXPECT_EQ(got, cq);
  EXPECT_EQ(got_ctx, &tag);
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  fake().FailCall("GetCqEvent", EINTR);
  EXPECT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), -1);
  EXPECT_EQ(errno, EINTR);
  EXPECT_EQ(ibv_get_cq_event(ch, nullptr, &got_ctx), -1);
  EXPECT_EQ(errno, EINVAL);

  ibv_ack_cq_events(cq, 3);
  EXPECT_EQ(fake().CqOf(cq)->acked_events, 3u);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(ResourcesTest, SrqSizesModifyAndQuery) {
  fake().cap_extra = 2;
  ibv_srq_init_attr init{};
  int tag = 0;
  init.srq_context = &tag;
  init.attr = {30, 3, 5};
  ibv_srq* srq = ibv_create_srq(pd_, &init);
  ASSERT_NE(srq, nullptr);
  const eng::Srq* e = fake().SrqOf(srq);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->pd, fake().PdOf(pd_));
  EXPECT_EQ(e->attr.srq_limit, 5u);
  // The real sizes come back, as ibv_create_srq(3) promises.
  EXPECT_EQ(init.attr.max_wr, 32u);
  EXPECT_EQ(init.attr.max_sge, 5u);
  EXPECT_EQ(srq->srq_context, &tag);
  EXPECT_EQ(srq->pd, pd_);

  ibv_srq_attr a{64, 0, 9};
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT | (1 << 2)), EINVAL);
  EXPECT_EQ(fake().CallCount("ModifySrq"), 0);
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
  EXPECT_EQ(e->last_modify_mask, uint32_t(IBV_SRQ_LIMIT));
  ibv_srq_attr q{};
  EXPECT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, 32u);
  EXPECT_EQ(q.max_sge, 5u);
  EXPECT_EQ(q.srq_limit, 9u);

  fake().FailCall("CreateSrq", EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_create_srq(pd_, &init), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(ResourcesTest, AhAttributesReachTheEngine) {
  ibv_ah_attr attr{};
  for (int i = 0; i < 16; ++i) attr.grh.dgid.raw[i] = static_cast<uint8_t>(0xf0 + i);
  attr.grh.flow_label = 0xabcde;
  attr.grh.sgid_index = 1;
  attr.grh.hop_limit = 17;
  attr.grh.traffic_class = 0x28;
  attr.is_global = 1;
  attr.dlid = 0x33;
  attr.sl = 4;
  attr.src_path_bits = 2;
  attr.static_rate = 7;
  attr.port_num = 1;
  ibv_ah* ah = ibv_create_ah(pd_, &attr);
  ASSERT_NE(ah, nullptr);
  const eng::Ah* e = fake().AhOf(ah);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->pd, fake().PdOf(pd_));
  EXPECT_EQ(std::memcmp(e->av.dgid.raw.data(), attr.grh.dgid.raw, 16), 0);
  EXPECT_EQ(e->av.flow_label, 0xabcdeu);
  EXPECT_EQ(e->av.sgid_index, 1);
  EXPECT_EQ(e->av.hop_limit, 17);
  EXPECT_EQ(e->av.traffic_class, 0x28);
  EXPECT_TRUE(e->av.is_global);
  EXPECT_EQ(e->av.dlid, 0x33);
  EXPECT_EQ(e->av.sl, 4);
  EXPECT_EQ(e->av.src_path_bits, 2);
  EXPECT_EQ(e->av.static_rate, 7);
  EXPECT_EQ(e->av.port_num, 1);
  EXPECT_EQ(ah->pd, pd_);

  fake().FailCall("CreateAh", EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_create_ah(pd_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  fake().FailCall("DestroyAh", EBUSY);
  EXPECT_EQ(ibv_destroy_ah(ah), EBUSY);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

TEST_F(ResourcesTest, CreateQpTranslatesAndWritesCapsBack) {
  fake().cap_extra = 1;
  ibv_srq_init_attr sinit{};
  sinit.attr = {8, 1, 0};
  ibv_srq* srq = ibv_create_srq(pd_, &sinit);
  ASSERT_NE(srq, nullptr);
  ibv_cq* rcq = ibv_create_cq(ctx_, 4, nullptr, nullptr, 0);
  ASSERT_NE(rcq, nullptr);
  int tag = 0;
  ibv_qp_init_attr init{};
  init.qp_context = &tag;
  init.send_cq = cq_;
  init.recv_cq = rcq;
  init.srq = srq;
  init.cap = {10, 20, 3, 4, 100};
  init.qp_type = IBV_QPT_UC;
  init.sq_sig_all = 1;
  fake().next_qpn = 0xabcde;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  ASSERT_NE(qp, nullptr);
  const eng::Qp* e = fake().QpOf(qp);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, eng::QpType::kUc);
  EXPECT_EQ(e->pd, fake().PdOf(pd_));
  EXPECT_EQ(e->send_cq, fake().CqOf(cq_));
  EXPECT_EQ(e->recv_cq, fake().CqOf(rcq));
  EXPECT_EQ(e->srq, fake().SrqOf(srq));
  EXPECT_TRUE(e->sq_sig_all);
  EXPECT_EQ(e->caps.max_send_wr, 10u);
  EXPECT_EQ(e->caps.max_recv_wr, 20u);
  EXPECT_EQ(e->caps.max_send_sge, 3u);
  EXPECT_EQ(e->caps.max_recv_sge, 4u);
  EXPECT_EQ(e->caps.max_inline_data, 100u);
  // What the engine really made comes back (ibv_create_qp(3)).
  EXPECT_EQ(init.cap.max_send_wr, 11u);
  EXPECT_EQ(init.cap.max_recv_wr, 21u);
  EXPECT_EQ(init.cap.max_send_sge, 4u);
  EXPECT_EQ(init.cap.max_recv_sge, 5u);
  EXPECT_EQ(init.cap.max_inline_data, 101u);
  EXPECT_EQ(qp->qp_num, 0xabcdeu);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);
  EXPECT_EQ(qp->qp_type, IBV_QPT_UC);
  EXPECT_EQ(qp->qp_context, &tag);
  EXPECT_EQ(qp->srq, srq);
  EXPECT_EQ(qp->send_cq, cq_);
  EXPECT_EQ(qp->recv_cq, rcq);
  EXPECT_EQ(ibv_qp_to_qp_ex(qp), nullptr);  // not created with send_ops_flags

  ibv_qp_attr attr{};
  ibv_qp_init_attr qinit{};
  ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_CAP, &qinit), 0);
  EXPECT_EQ(qinit.qp_context, &tag);
  EXPECT_EQ(qinit.qp_type, IBV_QPT_UC);
  EXPECT_EQ(qinit.sq_sig_all, 1);
  EXPECT_EQ(qinit.srq, srq);

  fake().FailCall("DestroyQp", EBUSY);
  EXPECT_EQ(ibv_destroy_qp(qp), EBUSY);
  EXPECT_EQ(qp->qp_num, 0xabcdeu);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
}

TEST_F(ResourcesTest, CreateQpRefusals) {
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  // XRC receive QPs come only from ibv_create_qp_ex with a domain (xrc.cc).
  for (ibv_qp_type t : {IBV_QPT_XRC_RECV, IBV_QPT_RAW_PACKET, IBV_QPT_DRIVER}) {
    init.qp_type = t;
    errno = 0;
    EXPECT_EQ(ibv_create_qp(pd_, &init), nullptr) << t;
    EXPECT_EQ(errno, EOPNOTSUPP) << t;
  }
  init.qp_type = IBV_QPT_RC;
  init.recv_cq = nullptr;
  EXPECT_EQ(ibv_create_qp(pd_, &init), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fake().CallCount("CreateQp"), 0);

  init.recv_cq = cq_;
  fake().FailCall("CreateQp", ENOMEM);
  EXPECT_EQ(ibv_create_qp(pd_, &init), nullptr);
  EXPECT_EQ(errno, ENOMEM);

  // ibv_create_qp_ex: comp_mask bits softrnic does not implement.
  ibv_qp_init_attr_ex ex{};
  ex.send_cq = cq_;
  ex.recv_cq = cq_;
  ex.qp_type = IBV_QPT_RC;
  ex.pd = pd_;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
  EXPECT_EQ(ibv_create_qp_ex(ctx_, &ex), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  ex.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  EXPECT_EQ(ibv_create_qp_ex(ctx_, &ex), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ex.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO;
  EXPECT_EQ(ibv_create_qp_ex(ctx_, &ex), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ex.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;  // no PD
  ex.send_ops_flags = IBV_QP_EX_WITH_SEND;
  EXPECT_EQ(ibv_create_qp_ex(ctx_, &ex), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // A PD of another context.
  ibv_context* other = OpenContext();
  ASSERT_NE(other, nullptr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  EXPECT_EQ(ibv_create_qp_ex(other, &ex), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fake().CallCount("CreateQp"), 1);  // only the scripted failure
  EXPECT_EQ(ibv_close_device(other), 0);
}

class ModifyQpTest : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    qp_ = CreateQp(IBV_QPT_RC);
    ASSERT_NE(qp_, nullptr);
  }
  void TearDown() override {
    if (qp_) {
      EXPECT_EQ(ibv_destroy_qp(qp_), 0);
    }
    VerbsTest::TearDown();
  }
  ibv_qp* qp_ = nullptr;
};

TEST_F(ModifyQpTest, EveryAttributeReachesTheEngine) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.cur_qp_state = IBV_QPS_INIT;
  a.path_mtu = IBV_MTU_2048;
  a.qkey = 0x11111111;
  a.rq_psn = 0x123456;
  a.sq_psn = 0x654321;
  a.dest_qp_num = 0xabcdef;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  a.cap = {1, 2, 3, 4, 5};
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid.raw[15] = 0x42;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 9;
  a.ah_attr.port_num = 1;
  a.pkey_index = 0;
  a.en_sqd_async_notify = 1;
  a.max_rd_atomic = 4;
  a.max_dest_rd_atomic = 6;
  a.min_rnr_timer = 12;
  a.port_num = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 6;
  const int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  ASSERT_EQ(ibv_modify_qp(qp_, &a, mask), 0);
  const eng::Qp* e = fake().QpOf(qp_);
  EXPECT_EQ(e->last_modify_mask, uint32_t(mask));
  const eng::QpAttr& x = e->attr;
  EXPECT_EQ(x.qp_state, eng::QpState::kRtr);
  EXPECT_EQ(x.path_mtu, eng::Mtu::k2048);
  EXPECT_EQ(x.qkey, 0x11111111u);
  EXPECT_EQ(x.rq_psn, 0x123456u);
  EXPECT_EQ(x.sq_psn, 0x654321u);
  EXPECT_EQ(x.dest_qp_num, 0xabcdefu);
  EXPECT_EQ(x.qp_access_flags, uint32_t(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(x.cap.max_inline_data, 5u);
  EXPECT_TRUE(x.ah_attr.is_global);
  EXPECT_EQ(x.ah_attr.dgid.raw[15], 0x42);
  EXPECT_EQ(x.ah_attr.sgid_index, 1);
  EXPECT_EQ(x.ah_attr.hop_limit, 9);
  EXPECT_TRUE(x.en_sqd_async_notify);
  EXPECT_EQ(x.max_rd_atomic, 4);
  EXPECT_EQ(x.max_dest_rd_atomic, 6);
  EXPECT_EQ(x.min_rnr_timer, 12);
  EXPECT_EQ(x.timeout, 14);
  EXPECT_EQ(x.retry_cnt, 7);
  EXPECT_EQ(x.rnr_retry, 6);
  // ibv_qp::state follows a successful transition.
  EXPECT_EQ(qp_->state, IBV_QPS_RTR);

  // Query reports the engine's attributes back through the same fields.
  ibv_qp_attr q;
  ibv_qp_init_attr init;
  std::memset(&q, 0xcc, sizeof(q));
  ASSERT_EQ(ibv_query_qp(qp_, &q, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(q.path_mtu, IBV_MTU_2048);
  EXPECT_EQ(q.dest_qp_num, 0xabcdefu);
  EXPECT_EQ(q.rq_psn, 0x123456u);
  EXPECT_EQ(q.ah_attr.grh.dgid.raw[15], 0x42);
  EXPECT_EQ(q.ah_attr.is_global, 1);
  EXPECT_EQ(q.max_dest_rd_atomic, 6);
  EXPECT_EQ(q.timeout, 14);
  EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
  EXPECT_EQ(q.alt_pkey_index, 0);  // zeroed, not left as 0xcc
  EXPECT_EQ(init.cap.max_inline_data, 5u);
}

TEST_F(ModifyQpTest, BadMasksAndValuesRefusedBeforeTheEngine) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_RATE_LIMIT), EOPNOTSUPP);
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | (1 << 21)), EINVAL);
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | (1 << 30)), EINVAL);
  EXPECT_EQ(ibv_modify_qp(qp_, nullptr, IBV_QP_STATE), EINVAL);
  // Enum fields out of range: a C caller may store anything in them.
  const int bad_state = 7;
  std::memcpy(&a.qp_state, &bad_state, sizeof(bad_state));
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE), EINVAL);
  a.qp_state = IBV_QPS_INIT;
  const int neg = -1;
  std::memcpy(&a.cur_qp_state, &neg, sizeof(neg));
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL);
  for (int mtu : {0, 6, -3}) {
    std::memcpy(&a.path_mtu, &mtu, sizeof(mtu));
    EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_PATH_MTU), EINVAL) << mtu;
  }
  // Without the mask bit, the field is not looked at.
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(fake().CallCount("ModifyQp"), 1);
  EXPECT_EQ(qp_->state, IBV_QPS_INIT);

  // The engine's refusal (wrong mask for the transition, IBA 10.3) is the
  // verb's, and ibv_qp::state does not move.
  fake().FailCall("ModifyQp", EINVAL);
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(qp_, &a, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(qp_->state, IBV_QPS_INIT);
}

TEST_F(ResourcesTest, GsiQpIsQpn1Ud) {
  ibv_qp_cap cap{4, 4, 1, 1, 0};
  fake().cap_extra = 1;
  ibv_qp* qp = softrnic_create_gsi_qp(pd_, cq_, cq_, &cap);
  ASSERT_NE(qp, nullptr);
  const eng::Qp* e = fake().QpOf(qp);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->gsi);
  EXPECT_EQ(qp->qp_num, 1u);
  EXPECT_EQ(qp->qp_type, IBV_QPT_UD);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);
  EXPECT_EQ(cap.max_send_wr, 5u);
  // Posting goes through the ordinary path.
  ibv_send_wr w{};
  w.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp, &w, &bad), EINVAL);  // UD without an AH
  EXPECT_EQ(ibv_destroy_qp(qp), 0);

  fake().FailCall("CreateGsiQp", EBUSY);
  errno = 0;
  EXPECT_EQ(softrnic_create_gsi_qp(pd_, cq_, cq_, &cap), nullptr);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(softrnic_create_gsi_qp(pd_, cq_, cq_, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// ibv_advise_mr: its argument rules are the verbs layer's, the SGEs reach
// the engine unchanged (the range checks are the engine's: tested by
// verbs_memory_features against the real one).
TEST_F(ResourcesTest, AdviseMrChecksArgumentsThenAsksTheEngine) {
  ibv_sge sges[2] = {{0x1000, 64, 0x11}, {0x9000, 4096, 0x22}};
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 1u << 3, sges, 2), EINVAL);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sges, 0), EINVAL);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, nullptr, 1), EINVAL);
  EXPECT_EQ(ibv_advise_mr(pd_, static_cast<ibv_advise_mr_advice>(9), 0, sges, 2), EOPNOTSUPP);
  EXPECT_EQ(fake().CallCount("AdviseMr"), 0);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, sges, 2),
            0);
  EXPECT_EQ(fake().last_advice, engine::MrAdvice::kPrefetchWrite);
  ASSERT_EQ(fake().last_advice_sges.size(), 2u);
  EXPECT_EQ(fake().last_advice_sges[1].addr, 0x9000u);
  EXPECT_EQ(fake().last_advice_sges[1].length, 4096u);
  EXPECT_EQ(fake().last_advice_sges[1].lkey, 0x22u);
  fake().FailCall("AdviseMr", EFAULT);
  EXPECT_EQ(ibv_advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, sges, 1), EFAULT);
}

}  // namespace
}  // namespace softrnic::verbs_test
