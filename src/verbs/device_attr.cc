#include "verbs/device_attr.h"

#include <cstdio>
#include <cstring>

namespace softrnic::verbs {

void FillDeviceAttr(const engine::DeviceAttr& a, ibv_device_attr* out) {
  std::memset(out, 0, sizeof(*out));
  std::snprintf(out->fw_ver, sizeof(out->fw_ver), "%s", a.fw_ver.c_str());
  out->node_guid = a.node_guid;
  out->sys_image_guid = a.sys_image_guid ? a.sys_image_guid : a.node_guid;
  out->max_mr_size = a.max_mr_size;
  out->page_size_cap = a.page_size_cap;
  out->vendor_id = a.vendor_id;
  out->vendor_part_id = a.vendor_part_id;
  out->hw_ver = a.hw_ver;
  out->max_qp = static_cast<int>(a.max_qp);
  out->max_qp_wr = static_cast<int>(a.max_qp_wr);
  out->device_cap_flags = kDeviceCapFlags;
  out->max_sge = static_cast<int>(a.max_sge);
  out->max_sge_rd = static_cast<int>(a.max_sge_rd);
  out->max_cq = static_cast<int>(a.max_cq);
  out->max_cqe = static_cast<int>(a.max_cqe);
  out->max_mr = static_cast<int>(a.max_mr);
  out->max_mw = static_cast<int>(a.max_mw);
  out->max_pd = static_cast<int>(a.max_pd);
  out->max_qp_rd_atom = static_cast<int>(a.max_qp_rd_atom);
  out->max_res_rd_atom = static_cast<int>(a.max_res_rd_atom);
  out->max_qp_init_rd_atom = static_cast<int>(a.max_qp_init_rd_atom);
  out->atomic_cap = IBV_ATOMIC_HCA;  // atomics are executed under the engine lock
  out->max_ah = static_cast<int>(a.max_ah);
  out->max_mcast_grp = static_cast<int>(a.max_mcast_grp);
  out->max_mcast_qp_attach = static_cast<int>(a.max_mcast_qp_attach);
  out->max_total_mcast_qp_attach = static_cast<int>(a.max_total_mcast_qp_attach);
  out->max_srq = static_cast<int>(a.max_srq);
  out->max_srq_wr = static_cast<int>(a.max_srq_wr);
  out->max_srq_sge = static_cast<int>(a.max_srq_sge);
  out->max_pkeys = static_cast<uint16_t>(a.max_pkeys);
  out->local_ca_ack_delay = a.local_ca_ack_delay;
  out->phys_port_cnt = a.phys_port_cnt;
}

void FillOdpCaps(ibv_odp_caps* out) {
  std::memset(out, 0, sizeof(*out));
  out->general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  constexpr uint32_t kTwoSided = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
  out->per_transport_caps.rc_odp_caps = kTwoSided | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                        IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  out->per_transport_caps.uc_odp_caps = kTwoSided | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
  out->per_transport_caps.ud_odp_caps = kTwoSided | IBV_ODP_SUPPORT_SRQ_RECV;
}

void FillPortAttr(const engine::Device& dev, ibv_port_attr* out) {
  const engine::DeviceAttr& a = dev.attr();
  std::memset(out, 0, sizeof(*out));
  using Facts = engine::PortFacts;  // shared with `softrnic run`'s sysfs view
  out->state = static_cast<ibv_port_state>(Facts::kState);
  out->max_mtu = static_cast<ibv_mtu>(a.max_mtu);
  out->active_mtu = static_cast<ibv_mtu>(a.active_mtu);
  out->gid_tbl_len = static_cast<int>(dev.gids().size());
  out->port_cap_flags = Facts::kCapFlags;
  out->max_msg_sz = a.max_msg_sz;
  out->pkey_tbl_len = static_cast<uint16_t>(a.max_pkeys);
  out->lid = Facts::kLid;
  out->max_vl_num = 1;
  out->active_width = Facts::kActiveWidth;
  out->active_speed = Facts::kActiveSpeed;
  out->phys_state = Facts::kPhysState;
  out->link_layer = IBV_LINK_LAYER_ETHERNET;
}

bool FillGidEntry(const engine::Device& dev, uint32_t port, uint32_t index, ibv_gid_entry* out) {
  const auto gids = dev.gids();
  if (index >= gids.size()) return false;
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->gid.raw, gids[index].raw.data(), 16);
  out->gid_index = index;
  out->port_num = port;
  out->gid_type = IBV_GID_TYPE_ROCE_V2;
  out->ndev_ifindex = 0;
  return true;
}

}  // namespace softrnic::verbs
