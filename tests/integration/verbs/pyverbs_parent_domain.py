#!/usr/bin/python3
"""Custom allocators of a parent domain (issue 15) as python3-pyverbs uses
them, with the calls rdma-core's tests/test_parent_domain.py makes, over
softrnic's libibverbs.so.1, in one process (two QPs of one device
connected to each other: RoCE v2 over UDP through the kernel).

The cases are the upstream suite's: a parent domain without allocators,
with allocators that answer IBV_ALLOCATOR_USE_DEFAULT, with posix_memalign
allocators (RC, UD, and RC through an SRQ and an extended CQ of 2000
entries made on the parent domain), and with a bump allocator in a 2 MiB
huge page (when the host has one to give). Each runs 10 SEND/RECV round
trips. Beyond what upstream checks, the allocators record their calls:
every queue made on the parent domain asks (with its resource type, a size
that holds its entries, a power-of-two alignment), every block is freed
exactly once when its object is closed, USE_DEFAULT blocks never are, and
an allocator that returns NULL makes QP, SRQ and CQ creation fail with
ENOMEM.

usage: pyverbs_parent_domain.py
Exit 0 if every check passes, 1 if not. LD_LIBRARY_PATH must point at
softrnic's libraries."""
import errno
import os
import sys
import time

import pyverbs.enums as e
import pyverbs.mem_alloc as mem
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ, CQEX, CqInitAttrEx, PollCqAttr
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD, ParentDomain, ParentDomainContext, ParentDomainInitAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

# softrnic's resource types (docs/user-guide.md): mlx5's codes, no driver id.
RES_QP, RES_SRQ, RES_CQ = 1, 4, 5
HUGE_PAGE_SIZE = 0x200000
MSG = 1024
NUM_MSGS = 1000  # upstream's receive queue depth (tests/base.py num_msgs)
GRH = 40
UD_QKEY = 0x11111111
failed = 0


def check(what, ok):
    global failed
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failed = 1


class Recorder:
    """What the allocators were asked, and what they gave back."""

    def __init__(self):
        self.allocs = []  # (ptr, size, alignment, type)
        self.frees = []   # (ptr, type)
        self.defaults = 0


REC = Recorder()


# The upstream suite's allocators (tests/test_parent_domain.py), recording.
def default_allocator(pd, context, size, alignment, resource_type):
    REC.defaults += 1
    REC.allocs.append((None, size, alignment, resource_type))
    return e._IBV_ALLOCATOR_USE_DEFAULT


def default_free(pd, context, ptr, resource_type):
    REC.frees.append((ptr, resource_type))
    return e._IBV_ALLOCATOR_USE_DEFAULT


def mem_align_allocator(pd, context, size, alignment, resource_type):
    p = mem.posix_memalign(size, alignment)
    REC.allocs.append((p, size, alignment, resource_type))
    return p


def free_func(pd, context, ptr, resource_type):
    REC.frees.append((ptr, resource_type))
    mem.free(ptr)


def huge_page_alloc(pd, context, size, alignment, resource_type):
    ptr = context.user_data
    remainder = ptr % alignment
    ptr += 0 if remainder == 0 else (alignment - remainder)
    context.user_data += size
    REC.allocs.append((ptr, size, alignment, resource_type))
    return ptr


def huge_page_free(pd, context, ptr, resource_type):
    REC.frees.append((ptr, resource_type))


def null_allocator(pd, context, size, alignment, resource_type):
    REC.allocs.append((0, size, alignment, resource_type))
    return 0


class Side:
    """One end: a parent domain (with or without allocators), a CQ (plain,
    or extended on the parent domain), an optional SRQ on it, one QP on it,
    an MR: what upstream's RCResources / UDResources make."""

    def __init__(self, ctx, qp_type, alloc=None, free=None, user_data=None, cq_ex=False,
                 with_srq=False):
        self.ctx = ctx
        self.qp_type = qp_type
        self.protection_domain = PD(ctx)
        # Kept for the parent domain's life: pyverbs hands the C library a
        # borrowed pointer to it (as upstream's res.pd_ctx).
        self.pd_ctx = None
        if alloc and free:
            self.pd_ctx = ParentDomainContext(self.protection_domain, alloc, free, user_data)
        self.pd = ParentDomain(ctx, attr=ParentDomainInitAttr(pd=self.protection_domain,
                                                              pd_context=self.pd_ctx))
        self.cq_ex = cq_ex
        if cq_ex:
            self.cq = CQEX(ctx, CqInitAttrEx(cqe=2000, wc_flags=e.IBV_WC_STANDARD_FLAGS,
                                             parent_domain=self.pd,
                                             comp_mask=e.IBV_CQ_INIT_ATTR_MASK_FLAGS |
                                             e.IBV_CQ_INIT_ATTR_MASK_PD))
        else:
            self.cq = CQ(ctx, NUM_MSGS, None, None, 0)
        self.srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=NUM_MSGS))) if with_srq else None
        extra = GRH if qp_type == e.IBV_QPT_UD else 0
        self.mr = MR(self.pd, MSG + extra, e.IBV_ACCESS_LOCAL_WRITE)
        cap = QPCap(max_recv_wr=0 if with_srq else NUM_MSGS)
        init = QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, srq=self.srq, cap=cap)
        if qp_type == e.IBV_QPT_UD:
            attr = QPAttr(port_num=1)
            attr.qkey = UD_QKEY
            attr.pkey_index = 0
            self.qp = QP(self.pd, init, attr)
        else:
            self.qp = QP(self.pd, init)
        self.gid = ctx.query_gid(port_num=1, index=0)

    def connect(self, peer):
        if self.qp_type == e.IBV_QPT_UD:
            # Already RTS: pyverbs moves a UD QP made with a QPAttr there.
            gr = GlobalRoute(dgid=peer.gid, sgid_index=0)
            self.ah = AH(self.pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
            self.peer_qpn = peer.qp.qp_num
            return
        attr = QPAttr(port_num=1)
        attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = peer.qp.qp_num
        attr.rq_psn = attr.sq_psn = 0
        attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
        attr.min_rnr_timer = 12
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=peer.gid, sgid_index=0), is_global=1,
                              port_num=1)
        self.qp.to_rts(attr)

    def post_recv(self):
        extra = GRH if self.qp_type == e.IBV_QPT_UD else 0
        wr = RecvWR(sg=[SGE(self.mr.buf, MSG + extra, self.mr.lkey)], num_sge=1)
        if self.srq:
            self.srq.post_recv(wr)
        else:
            self.qp.post_recv(wr)

    def send(self, byte):
        self.mr.write(bytes([byte]) * MSG, MSG)
        wr = SendWR(num_sge=1, sg=[SGE(self.mr.buf, MSG, self.mr.lkey)])
        if self.qp_type == e.IBV_QPT_UD:
            wr.set_wr_ud(self.ah, self.peer_qpn, UD_QKEY)
        self.qp.post_send(wr)

    def poll(self, timeout=5.0):
        """Status of the next completion, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.cq_ex:
                if self.cq.start_poll(PollCqAttr()) == 0:
                    try:
                        return self.cq.status
                    finally:
                        self.cq.end_poll()
            else:
                n, wcs = self.cq.poll()
                if n:
                    return wcs[0].status
        return None

    def received(self):
        offset = GRH if self.qp_type == e.IBV_QPT_UD else 0
        return self.mr.read(MSG, offset)

    def close(self):
        for o in (self.qp, self.srq, self.mr, self.cq):
            if o is not None:
                o.close()
        if getattr(self, "ah", None) is not None:
            self.ah.close()
        self.pd.close()
        self.protection_domain.close()


def traffic(client, server, iters=10):
    """upstream's u.traffic: SEND/RECV both ways, the receive re-posted."""
    client.post_recv()
    server.post_recv()
    for i in range(iters):
        client.send(i % 200 + 1)
        if client.poll() != e.IBV_WC_SUCCESS or server.poll() != e.IBV_WC_SUCCESS:
            return False
        server.post_recv()
        if server.received() != bytes([i % 200 + 1]) * MSG:
            return False
        server.send(i % 200 + 2)
        if server.poll() != e.IBV_WC_SUCCESS or client.poll() != e.IBV_WC_SUCCESS:
            return False
        client.post_recv()
        if client.received() != bytes([i % 200 + 2]) * MSG:
            return False
    return True


def run_case(ctx, name, qp_type=e.IBV_QPT_RC, alloc=None, free=None, user_data=None,
             **kwargs):
    """Both sides on parent domains, traffic, close; returns what the
    allocators were asked (REC) for the checks."""
    global REC
    REC = Recorder()
    client = server = None
    try:
        client = Side(ctx, qp_type, alloc, free, user_data, **kwargs)
        server = Side(ctx, qp_type, alloc, free, user_data, **kwargs)
        client.connect(server)
        server.connect(client)
        check("%s: 10 round trips" % name, traffic(client, server))
    except PyverbsRDMAError as ex:
        check("%s: %s" % (name, ex), False)
    finally:
        for s in (client, server):
            if s is not None:
                s.close()
    return REC


def check_blocks(name, rec, types):
    asked = {t for (_, _, _, t) in rec.allocs}
    check("%s: asked for %s (%s)" % (name, sorted(types), sorted(asked)), asked == set(types))
    check("%s: power-of-two alignments >= %d" % (name, 8),
          all(a >= 8 and a & (a - 1) == 0 for (_, _, a, _) in rec.allocs))
    check("%s: blocks aligned as asked" % name,
          all(p % a == 0 for (p, _, a, _) in rec.allocs if p))
    # Every block back exactly once, with its type.
    given = sorted((p, t) for (p, _, _, t) in rec.allocs)
    back = sorted(rec.frees)
    check("%s: %d blocks, each freed once with its type (%d frees)" %
          (name, len(given), len(back)), given == back)


def main():
    ctx = Context(name=os.environ.get("SOFTRNIC_DEVICE", "softrnic0"))

    run_case(ctx, "without allocators")

    rec = run_case(ctx, "default allocators", alloc=default_allocator, free=default_free)
    check("default allocators: each QP asked (%d calls)" % len(rec.allocs),
          any(t == RES_QP for (_, _, _, t) in rec.allocs))
    check("default allocators: free never called (%d)" % len(rec.frees), not rec.frees)

    rec = run_case(ctx, "mem_align RC", alloc=mem_align_allocator, free=free_func)
    check_blocks("mem_align RC", rec, {RES_QP})
    qp_bytes = sum(s for (_, s, _, t) in rec.allocs if t == RES_QP)
    check("mem_align RC: QP blocks hold 2 x %d receive WRs (%d bytes)" % (NUM_MSGS, qp_bytes),
          qp_bytes >= 2 * NUM_MSGS * 16)

    rec = run_case(ctx, "mem_align UD", qp_type=e.IBV_QPT_UD, alloc=mem_align_allocator,
                   free=free_func)
    check_blocks("mem_align UD", rec, {RES_QP})

    rec = run_case(ctx, "mem_align SRQ + extended CQ", alloc=mem_align_allocator,
                   free=free_func, cq_ex=True, with_srq=True)
    check_blocks("mem_align SRQ + extended CQ", rec, {RES_QP, RES_SRQ, RES_CQ})
    cq_bytes = [s for (_, s, _, t) in rec.allocs if t == RES_CQ]
    check("mem_align SRQ + extended CQ: a CQ block of >= 2000 entries each (%s)" % cq_bytes,
          len(cq_bytes) == 2 and all(s >= 2000 * 16 for s in cq_bytes))
    srq_bytes = sum(s for (_, s, _, t) in rec.allocs if t == RES_SRQ)
    check("mem_align SRQ + extended CQ: SRQ blocks hold 2 x %d WRs (%d bytes)" %
          (NUM_MSGS, srq_bytes), srq_bytes >= 2 * NUM_MSGS * 16)

    # upstream's test_huge_page_traffic: needs a huge page (vm.nr_hugepages).
    try:
        pages = [mem.mmap(length=HUGE_PAGE_SIZE,
                          flags=mem.MAP_ANONYMOUS_ | mem.MAP_PRIVATE_ | mem.MAP_HUGETLB_)
                 for _ in range(2)]
    except Exception as ex:  # pyverbs raises MemoryError or PyverbsError
        pages = None
        print("SKIP huge page traffic: no 2 MiB huge page (%s)" % ex, flush=True)
    if pages:
        global REC
        REC = Recorder()
        client = server = None
        try:
            client = Side(ctx, e.IBV_QPT_RC, huge_page_alloc, huge_page_free, pages[0])
            server = Side(ctx, e.IBV_QPT_RC, huge_page_alloc, huge_page_free, pages[1])
            client.connect(server)
            server.connect(client)
            check("huge page: 10 round trips", traffic(client, server))
        finally:
            for s in (client, server):
                if s is not None:
                    s.close()
        for p in pages:
            mem.munmap(p, HUGE_PAGE_SIZE)
        check("huge page: the QPs' blocks in the pages",
              all(any(b <= p < b + HUGE_PAGE_SIZE for b in pages) for (p, _, _, _) in REC.allocs))

    # NULL from the allocator: ENOMEM, nothing to free.
    REC = Recorder()
    protection = PD(ctx)
    null_ctx = ParentDomainContext(protection, null_allocator, free_func)  # kept, as above
    parent = ParentDomain(ctx, attr=ParentDomainInitAttr(pd=protection, pd_context=null_ctx))
    cq = CQ(ctx, 16, None, None, 0)
    for what, make in (
            ("QP", lambda: QP(parent, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                                 cap=QPCap(max_recv_wr=16)))),
            ("SRQ", lambda: SRQ(parent, SrqInitAttr(SrqAttr(max_wr=16)))),
            ("extended CQ", lambda: CQEX(ctx, CqInitAttrEx(
                cqe=16, wc_flags=e.IBV_WC_STANDARD_FLAGS, parent_domain=parent,
                comp_mask=e.IBV_CQ_INIT_ATTR_MASK_FLAGS | e.IBV_CQ_INIT_ATTR_MASK_PD)))):
        try:
            make().close()
            check("NULL allocator: %s creation fails" % what, False)
        except PyverbsRDMAError as ex:
            check("NULL allocator: %s creation fails with ENOMEM (%d)" % (what, ex.error_code),
                  ex.error_code == errno.ENOMEM)
    check("NULL allocator: asked (%d), nothing freed (%d)" % (len(REC.allocs), len(REC.frees)),
          len(REC.allocs) >= 3 and not REC.frees)
    cq.close()
    parent.close()
    protection.close()
    ctx.close()
    return failed


if __name__ == "__main__":
    sys.exit(main())
