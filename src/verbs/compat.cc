// The helper verbs that have no engine behind them: enum-to-string and rate
// conversions, the kernel-ABI marshalling helpers librdmacm uses, address
// handles built from a received work completion, and the dmabuf and DM-import
// verbs softrnic does not offer (they fail with EOPNOTSUPP, never succeed).
#include <netinet/ip.h>

#include <cstring>
#include <iterator>
#include <type_traits>

#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <infiniband/sa.h>

#include "verbs/internal.h"

using namespace softrnic::verbs;

// ---- strings (same text as rdma-core, so tools print what users expect) -------

SOFTRNIC_EXPORT const char* ibv_wc_status_str(enum ibv_wc_status status) {
  static const char* const kStr[] = {
      "success",
      "local length error",
      "local QP operation error",
      "local EE context operation error",
      "local protection error",
      "Work Request Flushed Error",
      "memory management operation error",
      "bad response error",
      "local access error",
      "remote invalid request error",
      "remote access error",
      "remote operation error",
      "transport retry counter exceeded",
      "RNR retry counter exceeded",
      "local RDD violation error",
      "remote invalid RD request",
      "aborted error",
      "invalid EE context number",
      "invalid EE context state",
      "fatal error",
      "response timeout error",
      "general error",
      "TM error",
      "TM software rendezvous",
  };
  auto i = static_cast<unsigned>(status);
  return i < std::size(kStr) ? kStr[i] : "unknown";
}

SOFTRNIC_EXPORT const char* ibv_event_type_str(enum ibv_event_type event) {
  static const char* const kStr[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change",
      "WQ fatal",
  };
  auto i = static_cast<unsigned>(event);
  return i < std::size(kStr) ? kStr[i] : "unknown";
}

SOFTRNIC_EXPORT const char* ibv_node_type_str(enum ibv_node_type node_type) {
  static const char* const kStr[] = {
      "unknown",           "InfiniBand channel adapter", "InfiniBand switch",
      "InfiniBand router", "iWARP NIC",                  "usNIC",
      "usNIC UDP",         "unspecified",
  };
  auto i = static_cast<unsigned>(node_type);
  return i < std::size(kStr) ? kStr[i] : "unknown";
}

SOFTRNIC_EXPORT const char* ibv_port_state_str(enum ibv_port_state port_state) {
  static const char* const kStr[] = {
      "no state change (NOP)", "down", "init", "armed", "active", "active deferred",
  };
  auto i = static_cast<unsigned>(port_state);
  return i < std::size(kStr) ? kStr[i] : "unknown";
}

// ---- rates ------------------------------------------------------------------------

namespace {
struct RateRow {
  ibv_rate rate;
  int mult;  // multiple of 2.5 Gb/s, -1 where the rate is not a multiple
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};
}  // namespace

SOFTRNIC_EXPORT int ibv_rate_to_mult(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mult;
  return -1;
}

SOFTRNIC_EXPORT enum ibv_rate mult_to_ibv_rate(int mult) {
  for (const auto& r : kRates)
    if (r.mult == mult && mult > 0) return r.rate;
  return IBV_RATE_MAX;
}

SOFTRNIC_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mbps;
  return -1;
}

SOFTRNIC_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const auto& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

// ---- kernel ABI marshalling (rdma-core's marshall.c; librdmacm imports them) ---

SOFTRNIC_EXPORT void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

SOFTRNIC_EXPORT void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
  dst->qp_state = static_cast<ibv_qp_state>(src->qp_state);
}

namespace {
// ibv_sa_path_rec and the kernel's ib_user_path_rec name their fields alike;
// this copies every field but the GIDs (arrays in one, unions in the other)
// in either direction, converting each to the destination's type.
template <class Dst, class Src>
void CopyPathRecFields(Dst* dst, const Src* src) {
  const auto set = [](auto& to, const auto& from) { to = static_cast<std::remove_reference_t<decltype(to)>>(from); };
  set(dst->dlid, src->dlid);
  set(dst->slid, src->slid);
  set(dst->raw_traffic, src->raw_traffic);
  set(dst->flow_label, src->flow_label);
  set(dst->reversible, src->reversible);
  set(dst->mtu, src->mtu);
  set(dst->pkey, src->pkey);
  set(dst->hop_limit, src->hop_limit);
  set(dst->traffic_class, src->traffic_class);
  set(dst->numb_path, src->numb_path);
  set(dst->sl, src->sl);
  set(dst->mtu_selector, src->mtu_selector);
  set(dst->rate_selector, src->rate_selector);
  set(dst->rate, src->rate);
  set(dst->packet_life_time_selector, src->packet_life_time_selector);
  set(dst->packet_life_time, src->packet_life_time);
  set(dst->preference, src->preference);
}
}  // namespace

SOFTRNIC_EXPORT void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
  std::memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
  CopyPathRecFields(dst, src);
}

SOFTRNIC_EXPORT void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof(src->dgid));
  std::memcpy(dst->sgid, src->sgid.raw, sizeof(src->sgid));
  CopyPathRecFields(dst, src);
}

// ---- address handles from a received completion ------------------------------

namespace {

// RoCE v2 puts the 40-byte "GRH" slot of a UD receive buffer to two uses: an
// IPv6 header, or 20 unused bytes followed by the IPv4 header. Tell them
// apart as rdma-core does: IPv6 version nibble, else a valid IPv4 header at
// offset 20 (version 4, IHL 5, correct checksum).
bool Ipv4HeaderAt20(const ibv_grh* grh) {
  iphdr ip;
  std::memcpy(&ip, reinterpret_cast<const uint8_t*>(grh) + 20, sizeof(ip));
  if (ip.version != 4 || ip.ihl != 5) return false;
  uint16_t words[10];
  std::memcpy(words, &ip, sizeof(words));
  uint32_t sum = 0;
  for (uint16_t w : words) sum += w;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum) == 0;
}

void V4Mapped(uint32_t addr_be, ibv_gid* gid) {
  std::memset(gid->raw, 0, 16);
  gid->raw[10] = gid->raw[11] = 0xff;
  std::memcpy(&gid->raw[12], &addr_be, 4);
}

}  // namespace

SOFTRNIC_EXPORT int ibv_init_ah_from_wc(ibv_context* ctx, uint8_t port_num, ibv_wc* wc,
                                        ibv_grh* grh, ibv_ah_attr* ah_attr) {
  if (!ctx || !wc || !ah_attr) return EINVAL;
  std::memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (!(wc->wc_flags & IBV_WC_GRH)) return 0;
  if (!grh) return EINVAL;
  ibv_gid sgid, dgid;  // as seen by the receiver: the sender's and ours
  const uint32_t vtf = ntohl(grh->version_tclass_flow);
  if ((vtf >> 28) == 6 && !Ipv4HeaderAt20(grh)) {
    sgid = grh->sgid;
    dgid = grh->dgid;
    ah_attr->grh.flow_label = vtf & 0xfffff;
    ah_attr->grh.traffic_class = static_cast<uint8_t>((vtf >> 20) & 0xff);
  } else if (Ipv4HeaderAt20(grh)) {
    iphdr ip;
    std::memcpy(&ip, reinterpret_cast<const uint8_t*>(grh) + 20, sizeof(ip));
    V4Mapped(ip.saddr, &sgid);
    V4Mapped(ip.daddr, &dgid);
    ah_attr->grh.traffic_class = ip.tos;
  } else {
    return EPROTONOSUPPORT;
  }
  ah_attr->is_global = 1;
  ah_attr->grh.dgid = sgid;
  ah_attr->grh.hop_limit = 0xff;
  // The reply leaves from the local GID the request was sent to.
  auto gids = DevOf(ctx)->gids();
  for (size_t i = 0; i < gids.size(); ++i) {
    if (std::memcmp(gids[i].raw.data(), dgid.raw, 16) == 0) {
      ah_attr->grh.sgid_index = static_cast<uint8_t>(i);
      return 0;
    }
  }
  return ENOENT;  // addressed to a GID that is not ours
}

SOFTRNIC_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh,
                                              uint8_t port_num) {
  if (!pd) return FailNull<ibv_ah>(EINVAL);
  ibv_ah_attr attr;
  int rc = NoThrow<int>(ENOMEM, [&] { return ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr); });
  if (rc) return FailNull<ibv_ah>(rc);
  return ibv_create_ah(pd, &attr);
}

// RoCE over software has no L2 neighbour to resolve: MAC zero, no VLAN.
SOFTRNIC_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context* ctx, ibv_ah_attr* attr,
                                                uint8_t eth_mac[6], uint16_t* vid) {
  if (!ctx || !attr || !eth_mac) return EINVAL;
  std::memset(eth_mac, 0, 6);
  if (vid) *vid = 0xffff;
  return 0;
}

// ---- importing device memory: not offered (verbs/import.cc imports the rest) -----

SOFTRNIC_EXPORT ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return FailNull<ibv_dm>(EOPNOTSUPP); }
SOFTRNIC_EXPORT void ibv_unimport_dm(ibv_dm*) {}
