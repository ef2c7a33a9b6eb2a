"""rdma_cm multicast through python3-pyverbs (issue 15): the calls rdma-core's
own test suite makes (CMID.join_multicast with an address and with
JoinMCAttrEx, UDParam of the MULTICAST_JOIN event, post_ud_send to the
multicast QPN, leave_multicast), between two processes.

  pyverbs_multicast.py recv LOCAL_IP GROUP COUNT [ex]   member: prints
      "joined <mgid>", receives COUNT messages, checks them, leaves, then
      checks that nothing more arrives (prints "left")
  pyverbs_multicast.py send LOCAL_IP GROUP COUNT        sender (send-only
      join with JoinMCAttrEx), COUNT messages, then COUNT more after a pause
      (the member has left by then and must not see them)

Exit status 0 only if every check held.
"""
import socket
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, JoinMCAttrEx, UDParam
from pyverbs.cq import CQ
from pyverbs.qp import QPCap, QPInitAttr

GRH = 40
SIZE = 256
MULTICAST_QPN = 0xFFFFFF
RDMA_UDP_QKEY = 0x01234567


def expect_event(channel, want):
    ev = CMEvent(channel)
    got = ev.event_type
    if got != want:
        raise SystemExit(f'FAIL: event {ev.event_str()} (status?), expected {want}')
    return ev


def setup(local_ip, group, count):
    channel = CMEventChannel()
    cmid = CMID(creator=channel, port_space=ce.RDMA_PS_UDP)
    cmid.bind_addr(AddrInfo(src=local_ip, port_space=ce.RDMA_PS_UDP, flags=ce.RAI_PASSIVE))
    cmid.resolve_addr(AddrInfo(src=local_ip, dst=group, port_space=ce.RDMA_PS_UDP))
    expect_event(channel, ce.RDMA_CM_EVENT_ADDR_RESOLVED).ack_cm_event()
    # A CQ of the test's own, polled without blocking.
    cq = CQ(cmid.context, 2 * count + 4)
    cap = QPCap(max_send_wr=count, max_recv_wr=count + 1, max_send_sge=1, max_recv_sge=1)
    cmid.create_qp(QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap))
    return channel, cmid, cq


def poll(cq, want, seconds):
    """Work completions from cq: `want` of them, or what came in `seconds`."""
    out = []
    deadline = time.monotonic() + seconds
    while len(out) < want and time.monotonic() < deadline:
        n, wcs = cq.poll(want - len(out))
        out.extend(wcs[:n])
    return out


def check_ud_param(ev, group):
    ud = UDParam(ev)
    mgid = str(ud.ah_attr.dgid)
    want = b'\0' * 10 + b'\xff\xff' + socket.inet_aton(group)  # ::ffff:group
    if bytes.fromhex(mgid.replace(':', '')) != want or ud.qp_num != MULTICAST_QPN or ud.qkey != RDMA_UDP_QKEY:
        raise SystemExit(f'FAIL: UD parameters: dgid {mgid} qpn {ud.qp_num:#x} qkey {ud.qkey:#x}')
    return ud


def member(local_ip, group, count, extended):
    channel, cmid, cq = setup(local_ip, group, count)
    mr = cmid.reg_msgs(SIZE + GRH)
    for _ in range(count):
        cmid.post_recv(mr)
    if extended:
        group_ai = AddrInfo(src=group)  # JoinMCAttrEx keeps a pointer into it
        attr = JoinMCAttrEx(addr=group_ai,
                            comp_mask=ce.RDMA_CM_JOIN_MC_ATTR_ADDRESS | ce.RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
                            join_flags=ce.RDMA_MC_JOIN_FLAG_FULLMEMBER)
        cmid.join_multicast(mc_attr=attr)
    else:
        cmid.join_multicast(addr=AddrInfo(src=group))
    ev = expect_event(channel, ce.RDMA_CM_EVENT_MULTICAST_JOIN)
    ud = check_ud_param(ev, group)
    ev.ack_cm_event()
    print(f'joined {ud.ah_attr.dgid}', flush=True)
    wcs = poll(cq, count, 30.0)
    if len(wcs) != count:
        raise SystemExit(f'FAIL: received {len(wcs)} of {count}')
    for i, wc in enumerate(wcs):
        # One buffer for every receive: check the status and length of each.
        if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != SIZE + GRH or wc.src_qp == 0:
            raise SystemExit(f'FAIL: message {i}: status {wc.status} byte_len {wc.byte_len}')
    if mr.read(SIZE, GRH) != bytes([0x41]) * SIZE:
        raise SystemExit('FAIL: wrong payload')
    print(f'received {count}', flush=True)
    cmid.leave_multicast(AddrInfo(src=group))
    try:
        cmid.leave_multicast(AddrInfo(src=group))
    except Exception:  # EADDRNOTAVAIL: not joined any more
        pass
    else:
        raise SystemExit('FAIL: leaving a group twice succeeded')
    cmid.post_recv(mr)
    print('left', flush=True)
    # The sender's second batch must not arrive: the QP is detached.
    stray = poll(cq, 1, 4.0)
    if stray:
        raise SystemExit(f'FAIL: a message after leaving the group (status {stray[0].status})')
    print('nothing after leaving', flush=True)
    cmid.close()  # its QP before the test's CQ
    cq.close()


def sender(local_ip, group, count):
    channel, cmid, cq = setup(local_ip, group, count)
    mr = cmid.reg_msgs(SIZE + GRH)
    group_ai = AddrInfo(src=group)  # JoinMCAttrEx keeps a pointer into it
    attr = JoinMCAttrEx(addr=group_ai,
                        comp_mask=ce.RDMA_CM_JOIN_MC_ATTR_ADDRESS | ce.RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
                        join_flags=ce.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
    cmid.join_multicast(mc_attr=attr)
    ev = expect_event(channel, ce.RDMA_CM_EVENT_MULTICAST_JOIN)
    ud = check_ud_param(ev, group)
    ah = AH(cmid.pd, attr=ud.ah_attr)
    ev.ack_cm_event()
    mr.write(bytes([0x41]) * SIZE, SIZE)
    for batch in range(2):
        for i in range(count):
            cmid.post_ud_send(mr, ah, rqpn=MULTICAST_QPN, length=SIZE)
            wcs = poll(cq, 1, 5.0)
            if len(wcs) != 1 or wcs[0].status != e.IBV_WC_SUCCESS:
                raise SystemExit(f'FAIL: send {i} of batch {batch}')
            time.sleep(0.002)
        print(f'sent batch {batch}', flush=True)
        if batch == 0:
            time.sleep(1.5)  # the member leaves meanwhile
    cmid.leave_multicast(AddrInfo(src=group))
    cmid.close()
    cq.close()


def main():
    role, local_ip, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if role == 'recv':
        member(local_ip, group, count, len(sys.argv) > 5 and sys.argv[5] == 'ex')
    else:
        sender(local_ip, group, count)
    print('PASS', flush=True)


if __name__ == '__main__':
    main()
