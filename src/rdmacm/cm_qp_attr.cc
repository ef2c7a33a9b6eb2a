// The data QP of an rdma_cm id: the attributes the connection exchange
// gives it (rdma_init_qp_attr) and the moves the CM makes on the
// application's behalf (INIT at rdma_create_qp, RTR/RTS on accept or on the
// REP, ERR on rdma_disconnect), as librdmacm's ucma_modify_qp_* do.
#include <cstring>

#include "rdmacm/cm_internal.h"

namespace softrnic::rdmacm {

void QpToErr(Id* id) {
  if (!id->id.qp) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

int InitQpAttr(Id* id, ibv_qp_attr* a, int* mask) {
  bool ud = id->id.qp_type == IBV_QPT_UD;
  switch (a->qp_state) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      if (ud) {
        a->qkey = RDMA_UDP_QKEY;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
      } else {
        a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      if (ud) {
        *mask = IBV_QP_STATE;
        return 0;
      }
      if (!id->remote_qpn) return EINVAL;
      a->path_mtu = static_cast<ibv_mtu>(id->path_mtu);
      a->dest_qp_num = id->remote_qpn;
      a->rq_psn = id->remote_psn;
      a->max_dest_rd_atomic = id->resp_res;
      a->min_rnr_timer = 12;
      std::memset(&a->ah_attr, 0, sizeof a->ah_attr);
      a->ah_attr.is_global = 1;
      a->ah_attr.grh.dgid = id->dgid;
      a->ah_attr.grh.sgid_index = uint8_t(id->sgid_index);
      a->ah_attr.grh.hop_limit = 64;
      a->ah_attr.grh.traffic_class = id->tos;
      a->ah_attr.port_num = 1;
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    case IBV_QPS_RTS:
      a->sq_psn = ud ? 0 : id->local_psn;
      if (ud) {
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        return 0;
      }
      a->timeout = id->ack_timeout;
      a->retry_cnt = id->retry_cnt;
      a->rnr_retry = id->rnr_retry;
      a->max_rd_atomic = id->init_depth;
      *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
              IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    default:
      return EINVAL;
  }
}

int ModifyTo(Id* id, ibv_qp_state s) {
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = s;
  int rc = InitQpAttr(id, &a, &mask);
  if (rc) return rc;
  return ibv_modify_qp(id->id.qp, &a, mask);
}

int QpToRts(Id* id) {
  if (!id->id.qp) return 0;
  int rc = ModifyTo(id, IBV_QPS_RTR);
  if (!rc) rc = ModifyTo(id, IBV_QPS_RTS);
  if (rc) CM_DBG("modify QP to RTR/RTS failed: %d", rc);
  return rc;
}

}  // namespace softrnic::rdmacm
