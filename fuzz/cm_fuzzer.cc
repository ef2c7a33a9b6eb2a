// libFuzzer target: IBA CM MADs (src/rdmacm/mad.cc) on arbitrary bytes.
//
// The input is what QP1 hands the CM after the 40-byte GRH: a MAD of any
// length. It lives in a buffer of exactly its size, so AddressSanitizer
// reports any read past it. Build: this file plus src/rdmacm/mad.cc (mad.cc
// has no dependencies; the drop-in librdmacm.so.1 is not linked).
//
// Properties checked (abort on violation):
//  - DecodeCm accepts only full-size MADs of the CM class;
//  - an accepted message's private data length is the size IBA gives its
//    attribute (12.6.x), never more than the buffer it is copied into;
//  - decode(encode(decode(x))) == decode(x) for every modelled field: what
//    the CM acts on survives a round trip, so encoder and decoder agree on
//    every offset.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rdmacm/mad.h"

namespace {

using namespace softrnic::rdmacm;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "cm_fuzzer: property violated: %s\n", what);
  std::abort();
}
#define CHECK(cond)           \
  do {                        \
    if (!(cond)) Fail(#cond); \
  } while (0)

bool SameFields(const CmMsg& a, const CmMsg& b) {
  return a.attr == b.attr && a.tid == b.tid && a.local_comm_id == b.local_comm_id &&
         a.remote_comm_id == b.remote_comm_id && a.service_id == b.service_id && a.qkey == b.qkey &&
         a.qpn == b.qpn && a.starting_psn == b.starting_psn && a.responder_resources == b.responder_resources &&
         a.initiator_depth == b.initiator_depth && a.retry_count == b.retry_count &&
         a.rnr_retry_count == b.rnr_retry_count && a.flow_control == b.flow_control && a.srq == b.srq &&
         a.mtu == b.mtu && a.transport == b.transport && a.msg_rejected == b.msg_rejected &&
         a.reason == b.reason && a.sidr_status == b.sidr_status && a.pdata_len == b.pdata_len &&
         std::memcmp(a.pdata, b.pdata, a.pdata_len) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);
  CmMsg m;
  if (!DecodeCm(buf.data(), buf.size(), &m)) return 0;
  CHECK(size >= kMadSize);
  CHECK(buf[1] == kMgmtClassCm);
  CHECK(m.pdata_len == PrivateDataSize(m.attr));
  CHECK(m.pdata_len <= sizeof(m.pdata));
  if (m.attr == kAttrMra) return 0;  // recognised, not modelled
  std::vector<uint8_t> again(kMadSize);
  EncodeCm(m, again.data());
  CmMsg m2;
  CHECK(DecodeCm(again.data(), again.size(), &m2));
  CHECK(SameFields(m, m2));
  return 0;
}
