#!/usr/bin/python3
"""On-demand paging, device memory, memory windows and parent domains
(issue 15) as
python3-pyverbs (the calls rdma-core's own test suite makes) uses them over
softrnic's libibverbs.so.1, between two processes.

The responder registers an explicit ODP region of pages nobody touched, an
implicit ODP region (the whole address space), a device-memory region
(zero-based), binds a type 1 window (ibv_bind_mw) and a zero-based type 2
window (IBV_WR_BIND_MW) over a region that grants no remote right itself,
and makes its QP and extended CQ on a parent domain with custom allocators
(their queues in memory from posix_memalign). The
requester (plain memory, an ODP buffer it prefetches with ibv_advise_mr)
writes, reads and adds into each of them, then writes through the implicit
key into memory the responder mapped after registering it, and last into
memory that is not mapped (remote access error). The responder checks what
landed. The requester also imports its own context, PD and MR into a second context
(ibv_import_device of a dup of cmd_fd). The two sides exchange QPNs, GIDs,
keys and addresses over TCP.

usage: pyverbs_memory.py                   both sides, the responder as a
                                           child process (same host: the
                                           shared-memory path or UDP, as
                                           SOFTRNIC_TRANSPORT says)
       pyverbs_memory.py --listen ADDR:PORT     the responder
       pyverbs_memory.py --connect ADDR:PORT    the requester
Exit 0 if every check passes, 1 if not. LD_LIBRARY_PATH must point at
softrnic's libraries."""
import json
import mmap as pymmap
import socket
import subprocess
import sys
import time

import pyverbs.enums as e
import pyverbs.mem_alloc as mem
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ, CQEX, CqInitAttrEx, PollCqAttr
from pyverbs.device import AllocDmAttr, Context, DM
from pyverbs.mr import DMMR, MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD, ParentDomain, ParentDomainContext, ParentDomainInitAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

PAGE = pymmap.PAGESIZE
REMOTE = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
          e.IBV_ACCESS_REMOTE_ATOMIC)
failed = 0


def check(what, ok):
    global failed
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failed = 1


def gid_index(ctx):
    """Index 0 unless SOFTRNIC_GID_INDEX says otherwise."""
    import os
    return int(os.environ.get("SOFTRNIC_GID_INDEX", "0"))


def make_qp(pd, cq):
    cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))


def connect(ctx, qp, remote):
    attr = QPAttr(port_num=1)
    attr.qp_access_flags = REMOTE
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = remote["qpn"]
    attr.rq_psn = 0
    attr.sq_psn = 0
    attr.max_dest_rd_atomic = 4
    attr.max_rd_atomic = 4
    attr.min_rnr_timer = 12
    attr.timeout = 14
    attr.retry_cnt = 1  # an access error comes back at once
    attr.rnr_retry = 7
    gr = GlobalRoute(dgid=GID(remote["gid"]), sgid_index=gid_index(ctx))
    attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    qp.to_rts(attr)


def poll_one(cq, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n, wcs = cq.poll()
        if n:
            return wcs[0].status
    return None


def poll_ex(cq, timeout=5.0):
    """(status, opcode) of the next completion of an extended CQ, or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cq.start_poll(PollCqAttr()) == 0:
            try:
                return cq.status, cq.read_opcode()
            finally:
                cq.end_poll()
    return None


def send_json(sock, obj):
    sock.sendall((json.dumps(obj) + "\n").encode())


def recv_json(f):
    line = f.readline()
    if not line:
        raise RuntimeError("peer closed the control connection")
    return json.loads(line)


def resident(addr, npages):
    """Resident pages of [addr, addr + npages pages) from mincore(2)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    vec = (ctypes.c_ubyte * npages)()
    if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(npages * PAGE), vec) != 0:
        return -1
    return sum(v & 1 for v in vec)


def peek(addr, n):
    import ctypes
    return ctypes.string_at(addr, n)


def responder(listen):
    host, port = listen.rsplit(":", 1)
    srv = socket.create_server((host, int(port)))
    print("LISTENING", flush=True)
    conn, _ = srv.accept()
    f = conn.makefile("r")
    with Context(name="softrnic0") as ctx:
        pd = PD(ctx)
        # Parent domain with custom allocators (as rdma-core's
        # tests/test_parent_domain.py makes them): its QP and extended CQ
        # keep their entries in memory from posix_memalign, and every
        # request below goes through them.
        blocks = []

        def alloc(pd_, context, size, alignment, resource_type):
            p = mem.posix_memalign(size, alignment)
            blocks.append(p)
            return p

        def free(pd_, context, ptr, resource_type):
            blocks.remove(ptr)
            mem.free(ptr)

        # Kept while the parent domain lives: pyverbs hands the C library a
        # borrowed pointer to it.
        pd_ctx = ParentDomainContext(pd, alloc, free)
        parent = ParentDomain(ctx, attr=ParentDomainInitAttr(pd=pd, pd_context=pd_ctx))
        cq = CQEX(ctx, CqInitAttrEx(cqe=64, wc_flags=e.IBV_WC_STANDARD_FLAGS, parent_domain=parent,
                                    comp_mask=e.IBV_CQ_INIT_ATTR_MASK_FLAGS |
                                    e.IBV_CQ_INIT_ATTR_MASK_PD))
        qp = make_qp(parent, cq)
        check("the parent domain's CQ and QP in the allocator's memory (%d blocks)" % len(blocks),
              len(blocks) >= 2)

        npages = 8
        odp_addr = mem.mmap(length=npages * PAGE)
        odp = MR(parent, npages * PAGE, REMOTE | e.IBV_ACCESS_ON_DEMAND, address=odp_addr)
        check("explicit ODP registration touched no page", resident(odp_addr, npages) == 0)
        implicit = MR(parent, PAGE, REMOTE | e.IBV_ACCESS_ON_DEMAND, implicit=True)
        later = mem.mmap(length=2 * PAGE)  # mapped after the implicit registration
        # In page 0, below vm.mmap_min_addr (at least 4096): never mapped (a
        # page unmapped here could be taken by the next mmap before the
        # peer's WRITE arrives).
        hole = 0x100
        max_dm = ctx.query_device_ex().max_dm_size
        check("max_dm_size %d" % max_dm, max_dm > 0)
        dm = DM(ctx, AllocDmAttr(length=8192))
        dm.copy_to_dm(0, b"\x11" * 4096, 4096)
        dmmr = DMMR(parent, 4096, REMOTE | e.IBV_ACCESS_ZERO_BASED, dm, 2048)
        for offset, length in ((3, 4), (4, 3), (8192 + 4, 4), (0, 8192 + 4)):
            try:
                dm.copy_from_dm(offset, length)
                check("DM copy offset %d length %d refused" % (offset, length), False)
            except PyverbsRDMAError:
                check("DM copy offset %d length %d refused" % (offset, length), True)

        gid = ctx.query_gid(port_num=1, index=gid_index(ctx))
        send_json(conn, {"qpn": qp.qp_num, "gid": str(gid),
                         "odp": [odp_addr, odp.rkey], "implicit": [later, hole, implicit.rkey],
                         "dm": dmmr.rkey})
        peer = recv_json(f)
        connect(ctx, qp, peer)
        # Memory windows over a region that grants no remote right itself.
        wbuf = MR(parent, 8192, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
        rw = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
        mw1 = MW(parent, e.IBV_MW_TYPE_1)
        qp.bind_mw(mw1, MWBind(MWBindInfo(wbuf, wbuf.buf, 4096, rw), e.IBV_SEND_SIGNALED))
        check("type 1 bind completes", poll_ex(cq) == (e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW))
        mw2 = MW(parent, e.IBV_MW_TYPE_2)
        bind = SendWR(opcode=e.IBV_WR_BIND_MW)
        bind.set_bind_wr(mw2, MWBindInfo(wbuf, wbuf.buf + 4096, 4096,
                                         rw | e.IBV_ACCESS_ZERO_BASED))
        qp.post_send(bind)
        check("type 2 bind completes", poll_ex(cq) == (e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW))
        send_json(conn, {"ready": True, "mw1": [wbuf.buf, mw1.rkey], "mw2": bind.rkey})
        recv_json(f)  # the requester is done
        check("WRITE into untouched ODP page landed", peek(odp_addr + 3 * PAGE, PAGE) ==
              b"\x5a" * PAGE)
        check("FETCH_ADD into ODP: %d" % int.from_bytes(peek(odp_addr + 5 * PAGE, 8), "little"),
              int.from_bytes(peek(odp_addr + 5 * PAGE, 8), "little") == 5)
        check("only the pages accessed are resident (%d)" % resident(odp_addr, npages),
              resident(odp_addr, npages) == 3)  # WRITE page, READ of page 6, FETCH_ADD page
        check("WRITE through implicit key into later mapping",
              peek(later + 100, 512) == b"\x42" * 512)
        check("WRITE into device memory", dm.copy_from_dm(2048 + 1024, 256) == b"\xc3" * 256)
        check("WRITE through the type 1 window", wbuf.read(64, 100) == b"\x21" * 64)
        check("WRITE through the type 2 window at offset 8",
              wbuf.read(64, 4096 + 8) == b"\x22" * 64)
        send_json(conn, {"failed": failed})
        for obj in (mw1, mw2, wbuf, dmmr, dm, odp, implicit, qp, cq):
            obj.close()
        parent.close()
        pd.close()
        mem.munmap(odp_addr, npages * PAGE)
        mem.munmap(later, 2 * PAGE)
    return failed


def requester(target):
    host, port = target.rsplit(":", 1)
    for _ in range(200):
        try:
            sock = socket.create_connection((host, int(port)))
            break
        except OSError:
            time.sleep(0.05)
    f = sock.makefile("r")
    peer = recv_json(f)
    with Context(name="softrnic0") as ctx:
        pd = PD(ctx)
        cq = CQ(ctx, 64)
        qp = make_qp(pd, cq)
        buf = MR(pd, 4 * PAGE, REMOTE)
        # A local ODP buffer, prefetched writable before use.
        lodp = MR(pd, 2 * PAGE, REMOTE | e.IBV_ACCESS_ON_DEMAND)
        pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, e._IBV_ADVISE_MR_FLAG_FLUSH,
                     [SGE(lodp.buf, 2 * PAGE, lodp.lkey)])
        gid = ctx.query_gid(port_num=1, index=gid_index(ctx))
        send_json(sock, {"qpn": qp.qp_num, "gid": str(gid)})
        connect(ctx, qp, peer)
        windows = recv_json(f)

        def post(opcode, mr, offset, length, raddr, rkey, add=None):
            wr = SendWR(opcode=opcode, num_sge=1, sg=[SGE(mr.buf + offset, length, mr.lkey)])
            if add is not None:
                wr.set_wr_atomic(rkey, raddr, add, 0)
            else:
                wr.set_wr_rdma(rkey, raddr)
            qp.post_send(wr)
            return poll_one(cq)

        odp_addr, odp_rkey = peer["odp"]
        buf.write(b"\x5a" * PAGE, PAGE, 0)
        check("WRITE into remote untouched ODP page",
              post(e.IBV_WR_RDMA_WRITE, buf, 0, PAGE, odp_addr + 3 * PAGE, odp_rkey) ==
              e.IBV_WC_SUCCESS)
        check("READ from remote ODP into local ODP buffer",
              post(e.IBV_WR_RDMA_READ, lodp, 0, 256, odp_addr + 3 * PAGE, odp_rkey) ==
              e.IBV_WC_SUCCESS and lodp.read(256, 0) == b"\x5a" * 256)
        check("READ of an untouched remote ODP page is zeros",
              post(e.IBV_WR_RDMA_READ, buf, PAGE, 64, odp_addr + 6 * PAGE, odp_rkey) ==
              e.IBV_WC_SUCCESS and buf.read(64, PAGE) == b"\0" * 64)
        check("FETCH_ADD into remote ODP",
              post(e.IBV_WR_ATOMIC_FETCH_AND_ADD, buf, 2 * PAGE, 8, odp_addr + 5 * PAGE,
                   odp_rkey, add=5) == e.IBV_WC_SUCCESS)
        check("READ from device memory (zero-based)",
              post(e.IBV_WR_RDMA_READ, buf, 0, 128, 0, peer["dm"]) == e.IBV_WC_SUCCESS and
              buf.read(128, 0) == b"\x11" * 128)
        buf.write(b"\xc3" * 256, 256, 0)
        check("WRITE into device memory",
              post(e.IBV_WR_RDMA_WRITE, buf, 0, 256, 1024, peer["dm"]) == e.IBV_WC_SUCCESS)
        waddr, w1key = windows["mw1"]
        buf.write(b"\x21" * 64, 64, 0)
        check("WRITE through a type 1 window",
              post(e.IBV_WR_RDMA_WRITE, buf, 0, 64, waddr + 100, w1key) == e.IBV_WC_SUCCESS)
        buf.write(b"\x22" * 64, 64, 0)
        check("WRITE through a zero-based type 2 window",
              post(e.IBV_WR_RDMA_WRITE, buf, 0, 64, 8, windows["mw2"]) == e.IBV_WC_SUCCESS)
        check("READ through the type 1 window",
              post(e.IBV_WR_RDMA_READ, buf, PAGE, 64, waddr + 100, w1key) == e.IBV_WC_SUCCESS
              and buf.read(64, PAGE) == b"\x21" * 64)
        # The requester's context, PD and MR imported into a second context
        # (a dup of cmd_fd, as rdma-core's shared-PD test does); a READ
        # lands in the imported MR by its keys.
        import os
        ictx = Context(cmd_fd=os.dup(ctx.cmd_fd))
        ipd = PD(ictx, handle=pd.handle)
        imr = MR(ipd, handle=buf.handle, address=buf.buf)
        check("imported MR: same keys (lkey %#x)" % imr.lkey,
              imr.lkey == buf.lkey and imr.rkey == buf.rkey)
        check("READ into the imported MR",
              post(e.IBV_WR_RDMA_READ, imr, 2 * PAGE, 64, waddr + 100, w1key) ==
              e.IBV_WC_SUCCESS and imr.read(64, 2 * PAGE) == b"\x21" * 64)
        imr.unimport()
        ipd.unimport()
        ipd.close()
        ictx.close()
        later, hole, irkey = peer["implicit"]
        buf.write(b"\x42" * 512, 512, 0)
        check("WRITE through the implicit key",
              post(e.IBV_WR_RDMA_WRITE, buf, 0, 512, later + 100, irkey) == e.IBV_WC_SUCCESS)
        status = post(e.IBV_WR_RDMA_WRITE, buf, 0, 64, hole, irkey)
        check("WRITE into unmapped memory through the implicit key: remote access error (%s)"
              % status, status == e.IBV_WC_REM_ACCESS_ERR)
        send_json(sock, {"done": True})
        result = recv_json(f)
        check("responder's checks", result["failed"] == 0)
        for obj in (lodp, buf, qp, cq, pd):
            obj.close()
    return failed


def main():
    args = sys.argv[1:]
    if args[:1] == ["--listen"] and len(args) == 2:
        return responder(args[1])
    if args[:1] == ["--connect"] and len(args) == 2:
        return requester(args[1])
    if args:
        print(__doc__, file=sys.stderr)
        return 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen([sys.executable, __file__, "--listen", "127.0.0.1:%d" % port])
    rc = requester("127.0.0.1:%d" % port)
    crc = child.wait(timeout=60)
    check("responder exit %d" % crc, crc == 0)
    return 1 if (rc or crc or failed) else 0


if __name__ == "__main__":
    sys.exit(main())
