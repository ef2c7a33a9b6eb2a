#!/usr/bin/python3
"""XRC through python3-pyverbs over softrnic's libibverbs.so.1, with the
calls rdma-core's own XRC tests make (its tests/test_xrc.py and the
XRCResources of tests/base.py): the device's IBV_DEVICE_XRC flag, an XRC
domain opened by file, an XRC SRQ and its number, XRC receive QPs from
ibv_create_qp_ex with the domain, XRC send QPs, SENDs that name the SRQ
(ibv_send_wr and the ibv_qp_ex wr_set_xrc_srqn), and the error case: a
SEND naming an SRQ number that is not the receiver's completes with a
remote invalid request error.

usage: pyverbs_xrc.py   exit 0 if all checks pass, 1 if not
Run with LD_LIBRARY_PATH pointing at softrnic's libraries."""
import os
import sys
import tempfile

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr, QPInitAttrEx
from pyverbs.srq import SRQ, SrqInitAttrEx
from pyverbs.wr import RecvWR, SendWR, SGE
from pyverbs.xrcd import XRCD, XRCDInitAttr

MSG = 1500   # two packets at path MTU 1024
QPS = 2
failed = 0


def check(what, ok):
    global failed
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failed = 1


def poll(cq, n, tries=2000000):
    wcs = []
    while len(wcs) < n and tries > 0:
        got, polled = cq.poll(n - len(wcs))
        wcs += polled if got > 0 else []
        tries -= 1
    return wcs


def connect(qp, remote_qpn, gid):
    attr = QPAttr(port_num=1)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = remote_qpn
    attr.rq_psn = 0
    attr.sq_psn = 0
    attr.max_dest_rd_atomic = 1
    attr.max_rd_atomic = 1
    attr.min_rnr_timer = 1
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    gr = GlobalRoute(dgid=gid, sgid_index=0)
    attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
    qp.to_rts(attr)


def main():
    with Context(name="softrnic0") as ctx:
        attr = ctx.query_device()
        check("device_cap_flags has IBV_DEVICE_XRC",
              attr.device_cap_flags & e.IBV_DEVICE_XRC != 0)
        gid = ctx.query_gid(1, 0)
        pd = PD(ctx)
        cq = CQ(ctx, 100)

        # The domain by file, as XRCResources.create_xrcd does.
        fd, path = tempfile.mkstemp()
        mask = e.IBV_XRCD_INIT_ATTR_FD | e.IBV_XRCD_INIT_ATTR_OFLAGS
        xrcd = XRCD(ctx, XRCDInitAttr(mask, os.O_CREAT, fd))
        again = XRCD(ctx, XRCDInitAttr(mask, 0, fd))  # exists: no O_CREAT needed
        again.close()
        try:
            XRCD(ctx, XRCDInitAttr(mask, os.O_CREAT | os.O_EXCL, fd))
            check("O_EXCL on a file with a domain fails", False)
        except PyverbsRDMAError:
            check("O_EXCL on a file with a domain fails", True)

        # The XRC SRQ, as XRCResources.create_srq does.
        sa = SrqInitAttrEx(max_wr=4 * QPS)
        sa.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_XRCD |
                        e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_PD)
        sa.srq_type = e.IBV_SRQT_XRC
        sa.pd = pd
        sa.xrcd = xrcd
        sa.cq = cq
        srq = SRQ(ctx, sa)
        srqn = srq.get_srq_num()
        check("ibv_get_srq_num: 0x%06x" % srqn, 0 < srqn <= 0xFFFFFF)

        # Receive QPs from the context with the domain, send QPs from the PD.
        qp_attr = QPAttr(port_num=1)
        qp_attr.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
        recv_qps, send_qps = [], []
        for i in range(QPS):
            ia = QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV, comp_mask=e.IBV_QP_INIT_ATTR_XRCD,
                              xrcd=xrcd)
            recv_qps.append(QP(ctx, ia, qp_attr))
        send_qps.append(QP(pd, QPInitAttr(qp_type=e.IBV_QPT_XRC_SEND, scq=cq,
                                          cap=QPCap(max_send_wr=8, max_recv_wr=0,
                                                    max_send_sge=1, max_recv_sge=0)),
                           qp_attr))
        # The second through ibv_qp_ex (wr_set_xrc_srqn).
        iax = QPInitAttrEx(qp_type=e.IBV_QPT_XRC_SEND, scq=cq, pd=pd,
                           cap=QPCap(max_send_wr=8, max_recv_wr=0, max_send_sge=1,
                                     max_recv_sge=0),
                           comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                           send_ops_flags=e.IBV_QP_EX_WITH_SEND)
        from pyverbs.qp import QPEx
        send_qps.append(QPEx(ctx, iax, qp_attr))
        for s, r in zip(send_qps, recv_qps):
            connect(s, r.qp_num, gid)
            connect(r, s.qp_num, gid)
        check("XRC QPs reach RTS", all(q.qp_state == e.IBV_QPS_RTS for q in send_qps + recv_qps))

        send_mr = MR(pd, MSG, e.IBV_ACCESS_LOCAL_WRITE)
        recv_mr = MR(pd, MSG * QPS, e.IBV_ACCESS_LOCAL_WRITE)
        for i in range(QPS):
            srq.post_recv(RecvWR(wr_id=i, num_sge=1,
                                 sg=[SGE(recv_mr.buf + i * MSG, MSG, recv_mr.lkey)]))
        for i in range(QPS):
            send_mr.write(bytes([0x40 + i]) * MSG, MSG)
            sge = SGE(send_mr.buf, MSG, send_mr.lkey)
            if i == 0:
                wr = SendWR(wr_id=100 + i, num_sge=1, sg=[sge])
                wr.set_qp_type_xrc(srqn)
                send_qps[i].post_send(wr)
            else:
                q = send_qps[i]
                q.wr_start()
                q.wr_id = 100 + i
                q.wr_flags = e.IBV_SEND_SIGNALED
                q.wr_send()
                q.wr_set_xrc_srqn(srqn)
                q.wr_set_sge(sge)
                q.wr_complete()
            # One message at a time, so the receive completion order is known.
            wcs = poll(cq, 2)
            check("message %d: a send and a receive completion, both successful" % i,
                  len(wcs) == 2 and all(w.status == e.IBV_WC_SUCCESS for w in wcs))
            recv = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
            check("message %d: received through the SRQ on XRC receive QP 0x%x" %
                  (i, recv_qps[i].qp_num),
                  len(recv) == 1 and recv[0].qp_num == recv_qps[i].qp_num and
                  recv[0].byte_len == MSG)
            check("message %d: the payload" % i,
                  recv_mr.read(MSG, i * MSG) == bytes([0x40 + i]) * MSG)

        # The wrong SRQ number: the receiver answers Invalid Request.
        srq.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(recv_mr.buf, MSG, recv_mr.lkey)]))
        wr = SendWR(wr_id=200, num_sge=1, sg=[SGE(send_mr.buf, 64, send_mr.lkey)])
        wr.set_qp_type_xrc(srqn ^ 0x5A5A5A)
        send_qps[0].post_send(wr)
        wcs = poll(cq, 1)
        check("a SEND to an SRQ number the receiver lacks: IBV_WC_REM_INV_REQ_ERR (%s)" %
              [w.status for w in wcs],
              len(wcs) == 1 and wcs[0].wr_id == 200 and
              wcs[0].status == e.IBV_WC_REM_INV_REQ_ERR)

        for q in send_qps + recv_qps:
            q.close()
        srq.close()
        xrcd.close()
        os.close(fd)
        os.unlink(path)
    return failed


if __name__ == "__main__":
    sys.exit(main())
