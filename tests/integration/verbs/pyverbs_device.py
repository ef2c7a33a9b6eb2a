#!/usr/bin/python3
"""The device identity and the small verbs of issue 15 as python3-pyverbs
(the calls rdma-core's own test suite makes) sees them over softrnic's
libibverbs.so.1: a vendor id of softrnic's own, the same node GUID in two
processes, optional access flags accepted, ibv_rereg_mr, ECE answering
EOPNOTSUPP.

usage: pyverbs_device.py          the checks; exit 0 if all pass, 1 if not
       pyverbs_device.py --guid   prints this process's node GUID (hex)
Run with LD_LIBRARY_PATH pointing at softrnic's libraries."""
import errno
import subprocess
import sys

import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr

SOFTRNIC_VENDOR_ID = 0x025352
RXE_VENDOR_ID = 0xFFFFFF

failed = 0


def check(what, ok):
    global failed
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        failed = 1


def main():
    with Context(name="softrnic0") as ctx:
        if sys.argv[1:] == ["--guid"]:
            print(ctx.query_device().node_guid)
            return 0
        attr = ctx.query_device()
        check("vendor_id 0x%x is softrnic's (not 0, not rxe's)" % attr.vendor_id,
              attr.vendor_id == SOFTRNIC_VENDOR_ID and attr.vendor_id not in (0, RXE_VENDOR_ID))
        check("vendor_part_id 0x%x != 0" % attr.vendor_part_id, attr.vendor_part_id != 0)
        ex = ctx.query_device_ex()
        check("query_device_ex: vendor_id", ex.orig_attr.vendor_id == SOFTRNIC_VENDOR_ID)
        check("sys_image_guid = node_guid", attr.sys_image_guid == attr.node_guid)
        # Another process opens its own device (and its own per-process
        # loopback GID): same node GUID.
        other = subprocess.run([sys.executable, __file__, "--guid"], capture_output=True,
                               text=True, timeout=60)
        check("a second process reports node_guid %s (ours %s)"
              % (other.stdout.strip(), attr.node_guid),
              other.returncode == 0 and other.stdout.strip() == str(attr.node_guid))

        with PD(ctx) as pd:
            access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_RELAXED_ORDERING
            try:
                with MR(pd, 4096, access) as mr:
                    check("MR with IBV_ACCESS_RELAXED_ORDERING registered (lkey %#x)" % mr.lkey,
                          True)
            except PyverbsRDMAError as err:
                check("MR with IBV_ACCESS_RELAXED_ORDERING registered (%s)" % err, False)
            # ibv_rereg_mr, as rdma-core's test_mr.py calls it: access, PD,
            # and REMOTE_WRITE without LOCAL_WRITE refused.
            with PD(ctx) as pd2, MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE) as mr:
                lkey = mr.lkey
                mr.rereg(flags=e.IBV_REREG_MR_CHANGE_ACCESS, pd=pd, addr=0, length=0,
                         access=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
                mr.rereg(flags=e.IBV_REREG_MR_CHANGE_PD, pd=pd2, addr=0, length=0, access=0)
                check("rereg access, then PD: keys kept", mr.lkey == lkey)
                try:
                    mr.rereg(flags=e.IBV_REREG_MR_CHANGE_ACCESS, pd=pd, addr=0, length=0,
                             access=e.IBV_ACCESS_REMOTE_WRITE)
                    check("rereg REMOTE_WRITE without LOCAL_WRITE refused", False)
                except PyverbsRDMAError as err:
                    check("rereg REMOTE_WRITE without LOCAL_WRITE refused (%s)" % err, True)
                mr.rereg(flags=e.IBV_REREG_MR_CHANGE_PD, pd=pd, addr=0, length=0, access=0)
            with CQ(ctx, 8) as cq:
                init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                  cap=QPCap(max_send_wr=4, max_recv_wr=4))
                with QP(pd, init) as qp:
                    try:
                        qp.query_ece()
                        check("query_ece raises EOPNOTSUPP", False)
                    except PyverbsRDMAError as err:
                        check("query_ece raises EOPNOTSUPP (%s)" % err,
                              err.error_code == errno.EOPNOTSUPP)
    return failed


if __name__ == "__main__":
    sys.exit(main())
