// Address vectors: the translation of ibv_ah_attr to and from the engine's
// AddressVector (AHs and QP paths), and ibv_create_ah / ibv_destroy_ah.
#include <cstring>

#include "verbs/internal.h"

namespace softrnic::verbs {

void ToEngineAv(const ibv_ah_attr& in, eng::AddressVector* out) {
  std::memcpy(out->dgid.raw.data(), in.grh.dgid.raw, 16);
  out->flow_label = in.grh.flow_label;
  out->sgid_index = in.grh.sgid_index;
  out->hop_limit = in.grh.hop_limit;
  out->traffic_class = in.grh.traffic_class;
  out->is_global = in.is_global != 0;
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->port_num = in.port_num;
}

void FromEngineAv(const eng::AddressVector& in, ibv_ah_attr* out) {
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->grh.dgid.raw, in.dgid.raw.data(), 16);
  out->grh.flow_label = in.flow_label;
  out->grh.sgid_index = in.sgid_index;
  out->grh.hop_limit = in.hop_limit;
  out->grh.traffic_class = in.traffic_class;
  out->is_global = in.is_global ? 1 : 0;
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->port_num = in.port_num;
}

}  // namespace softrnic::verbs

using namespace softrnic::verbs;

// ---- AH ----------------------------------------------------------------------

SOFTRNIC_EXPORT ibv_ah* ibv_create_ah(ibv_pd* ibpd, ibv_ah_attr* attr) {
  if (!ibpd || !attr) return FailNull<ibv_ah>(EINVAL);
  return NoThrow<ibv_ah*>(nullptr, [&]() -> ibv_ah* {
    eng::AddressVector av;
    ToEngineAv(*attr, &av);
    auto* ah = NewFilledByEngine<Ah>([&](Ah* w) {
      return DevOf(ibpd->context)->CreateAh(reinterpret_cast<Pd*>(ibpd)->e, av, &w->ah, &w->e);
    });
    if (!ah) return nullptr;
    ah->ah.context = ibpd->context;
    ah->ah.pd = ibpd;
    HoldDomain(ibpd);
    return &ah->ah;
  });
}

SOFTRNIC_EXPORT int ibv_destroy_ah(ibv_ah* ibah) {
  if (!ibah) return EINVAL;
  auto* ah = reinterpret_cast<Ah*>(ibah);
  ibv_pd* const pd = ibah->pd;
  return DestroyThenFree(ah, [&] {
    const int rc = DevOf(ibah->context)->DestroyAh(ah->e);
    if (rc == 0) ReleaseDomain(pd);
    return rc;
  });
}
