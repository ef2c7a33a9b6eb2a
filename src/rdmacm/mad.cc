// Encoding and decoding of IBA CM MADs (see mad.h). Offsets are those of IBA
// 1.4 section 12.6 (REQ 12.6.5, REP 12.6.8, RTU 12.6.9, REJ 12.6.7, DREQ
// 12.6.10, DREP 12.6.11, SIDR_REQ 12.6.12, SIDR_REP 12.6.13), relative to
// the start of the CM payload (MAD byte 24). All fields big-endian.
#include "rdmacm/mad.h"

#include <algorithm>
#include <cstring>

namespace softrnic::rdmacm {

namespace {

void Put8(uint8_t* p, size_t o, uint8_t v) { p[o] = v; }
void Put16(uint8_t* p, size_t o, uint16_t v) {
  p[o] = uint8_t(v >> 8);
  p[o + 1] = uint8_t(v);
}
void Put32(uint8_t* p, size_t o, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[o + i] = uint8_t(v >> (24 - 8 * i));
}
void Put64(uint8_t* p, size_t o, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[o + i] = uint8_t(v >> (56 - 8 * i));
}
// 24-bit value in the top three bytes of a 32-bit word, low byte `low`.
void Put24(uint8_t* p, size_t o, uint32_t v, uint8_t low) { Put32(p, o, (v << 8) | low); }
uint16_t Get16(const uint8_t* p, size_t o) { return uint16_t(p[o] << 8 | p[o + 1]); }
uint32_t Get32(const uint8_t* p, size_t o) {
  return uint32_t(p[o]) << 24 | uint32_t(p[o + 1]) << 16 | uint32_t(p[o + 2]) << 8 | p[o + 3];
}
uint64_t Get64(const uint8_t* p, size_t o) { return uint64_t(Get32(p, o)) << 32 | Get32(p, o + 4); }
uint32_t Get24(const uint8_t* p, size_t o) { return Get32(p, o) >> 8; }

size_t PdataOffset(uint16_t attr) {
  switch (attr) {
    case kAttrReq: return 140;
    case kAttrRep: return 36;
    case kAttrRej: return 84;
    case kAttrRtu: return 8;
    case kAttrDreq: return 12;
    case kAttrDrep: return 8;
    case kAttrSidrReq: return 16;
    case kAttrSidrRep: return 96;
    default: return 0;
  }
}

}  // namespace

size_t PrivateDataSize(uint16_t attr) {
  switch (attr) {
    case kAttrReq: return kReqPdata;
    case kAttrRep: return kRepPdata;
    case kAttrRej: return kRejPdata;
    case kAttrRtu: return kRtuPdata;
    case kAttrDreq: return kDreqPdata;
    case kAttrDrep: return kDrepPdata;
    case kAttrSidrReq: return kSidrReqPdata;
    case kAttrSidrRep: return kSidrRepPdata;
    default: return 0;
  }
}

const char* CmAttrName(uint16_t attr) {
  switch (attr) {
    case kAttrReq: return "REQ";
    case kAttrMra: return "MRA";
    case kAttrRej: return "REJ";
    case kAttrRep: return "REP";
    case kAttrRtu: return "RTU";
    case kAttrDreq: return "DREQ";
    case kAttrDrep: return "DREP";
    case kAttrSidrReq: return "SIDR_REQ";
    case kAttrSidrRep: return "SIDR_REP";
    default: return "?";
  }
}

void EncodeCm(const CmMsg& m, uint8_t* buf) {
  std::memset(buf, 0, kMadSize);
  // Common MAD header (IBA 13.4.2).
  Put8(buf, 0, 1);  // BaseVersion
  Put8(buf, 1, kMgmtClassCm);
  Put8(buf, 2, kCmClassVersion);
  Put8(buf, 3, kMethodSend);
  Put64(buf, 8, m.tid);
  Put16(buf, 16, m.attr);
  uint8_t* p = buf + kMadHeader;
  switch (m.attr) {
    case kAttrReq:
      Put32(p, 0, m.local_comm_id);
      Put64(p, 8, m.service_id);
      Put32(p, 28, m.qkey);
      Put24(p, 32, m.qpn, m.responder_resources);
      Put24(p, 36, 0, m.initiator_depth);
      // Remote EECN(24) | remote CM response timeout(5) | transport(2) | E2E FC(1)
      Put32(p, 40, uint32_t(m.remote_cm_timeout & 0x1f) << 3 | uint32_t(m.transport & 3) << 1 |
                       (m.flow_control & 1));
      Put24(p, 44, m.starting_psn, uint8_t((m.local_cm_timeout & 0x1f) << 3 | (m.retry_count & 7)));
      Put16(p, 48, 0xffff);  // P_Key
      Put8(p, 50, uint8_t((m.mtu & 0xf) << 4 | (m.rnr_retry_count & 7)));
      Put8(p, 51, uint8_t((m.max_cm_retries & 0xf) << 4 | (m.srq & 1) << 3));
      Put16(p, 52, 0xffff);  // primary local LID: permissive (RoCE has no LIDs)
      Put16(p, 54, 0xffff);
      std::memcpy(p + 56, m.sgid, 16);
      std::memcpy(p + 72, m.dgid, 16);
      Put8(p, 92, m.traffic_class);
      Put8(p, 93, m.hop_limit);
      Put8(p, 95, uint8_t((m.local_ack_timeout & 0x1f) << 3));
      break;
    case kAttrRep:
      Put32(p, 0, m.local_comm_id);
      Put32(p, 4, m.remote_comm_id);
      Put32(p, 8, m.qkey);
      Put24(p, 12, m.qpn, 0);
      Put24(p, 20, m.starting_psn, 0);
      Put8(p, 24, m.responder_resources);
      Put8(p, 25, m.initiator_depth);
      Put8(p, 26, uint8_t((m.flow_control & 1)));
      Put8(p, 27, uint8_t((m.rnr_retry_count & 7) << 5 | (m.srq & 1) << 4));
      break;
    case kAttrRej:
      Put32(p, 0, m.local_comm_id);
      Put32(p, 4, m.remote_comm_id);
      Put8(p, 8, uint8_t((m.msg_rejected & 3) << 6));
      Put16(p, 10, m.reason);
      break;
    case kAttrRtu:
    case kAttrDrep:
      Put32(p, 0, m.local_comm_id);
      Put32(p, 4, m.remote_comm_id);
      break;
    case kAttrDreq:
      Put32(p, 0, m.local_comm_id);
      Put32(p, 4, m.remote_comm_id);
      Put24(p, 8, m.qpn, 0);
      break;
    case kAttrSidrReq:
      Put32(p, 0, m.local_comm_id);
      Put16(p, 4, 0xffff);
      Put64(p, 8, m.service_id);
      break;
    case kAttrSidrRep:
      Put32(p, 0, m.local_comm_id);
      Put8(p, 4, m.sidr_status);
      Put24(p, 8, m.qpn, 0);
      Put64(p, 12, m.service_id);
      Put32(p, 20, m.qkey);
      break;
    default:
      break;
  }
  size_t off = PdataOffset(m.attr), size = PrivateDataSize(m.attr);
  if (size) std::memcpy(p + off, m.pdata, std::min(size, m.pdata_len));
}

bool DecodeCm(const uint8_t* buf, size_t len, CmMsg* m) {
  if (len < kMadSize) return false;
  if (buf[0] != 1 || buf[1] != kMgmtClassCm) return false;
  *m = CmMsg{};
  m->tid = Get64(buf, 8);
  m->attr = Get16(buf, 16);
  const uint8_t* p = buf + kMadHeader;
  switch (m->attr) {
    case kAttrReq:
      m->local_comm_id = Get32(p, 0);
      m->service_id = Get64(p, 8);
      m->qkey = Get32(p, 28);
      m->qpn = Get24(p, 32);
      m->responder_resources = p[35];
      m->initiator_depth = p[39];
      m->remote_cm_timeout = p[43] >> 3;
      m->transport = (p[43] >> 1) & 3;
      m->flow_control = p[43] & 1;
      m->starting_psn = Get24(p, 44);
      m->local_cm_timeout = p[47] >> 3;
      m->retry_count = p[47] & 7;
      m->mtu = p[50] >> 4;
      m->rnr_retry_count = p[50] & 7;
      m->max_cm_retries = p[51] >> 4;
      m->srq = (p[51] >> 3) & 1;
      std::memcpy(m->sgid, p + 56, 16);
      std::memcpy(m->dgid, p + 72, 16);
      m->traffic_class = p[92];
      m->hop_limit = p[93];
      m->local_ack_timeout = p[95] >> 3;
      break;
    case kAttrRep:
      m->local_comm_id = Get32(p, 0);
      m->remote_comm_id = Get32(p, 4);
      m->qkey = Get32(p, 8);
      m->qpn = Get24(p, 12);
      m->starting_psn = Get24(p, 20);
      m->responder_resources = p[24];
      m->initiator_depth = p[25];
      m->flow_control = p[26] & 1;
      m->rnr_retry_count = p[27] >> 5;
      m->srq = (p[27] >> 4) & 1;
      break;
    case kAttrRej:
      m->local_comm_id = Get32(p, 0);
      m->remote_comm_id = Get32(p, 4);
      m->msg_rejected = p[8] >> 6;
      m->reason = Get16(p, 10);
      break;
    case kAttrRtu:
    case kAttrDrep:
      m->local_comm_id = Get32(p, 0);
      m->remote_comm_id = Get32(p, 4);
      break;
    case kAttrDreq:
      m->local_comm_id = Get32(p, 0);
      m->remote_comm_id = Get32(p, 4);
      m->qpn = Get24(p, 8);
      break;
    case kAttrSidrReq:
      m->local_comm_id = Get32(p, 0);
      m->service_id = Get64(p, 8);
      break;
    case kAttrSidrRep:
      m->local_comm_id = Get32(p, 0);
      m->sidr_status = p[4];
      m->qpn = Get24(p, 8);
      m->service_id = Get64(p, 12);
      m->qkey = Get32(p, 20);
      break;
    case kAttrMra:
      return true;
    default:
      return false;
  }
  size_t off = PdataOffset(m->attr), size = PrivateDataSize(m->attr);
  std::memcpy(m->pdata, p + off, size);
  m->pdata_len = size;
  return true;
}

uint16_t MadAttr(const uint8_t* mad) { return Get16(mad, 16); }

void SetReqPrimaryDgid(uint8_t* mad, const uint8_t dgid[16]) { std::memcpy(mad + kMadHeader + 72, dgid, 16); }

void EncodeCmaHdr(uint8_t* pdata, const CmaHdr& h) {
  pdata[0] = 0;  // cma_version
  std::memcpy(pdata + 2, &h.src_port, 2);
  if (h.ipv6) {
    pdata[1] = 0x60;  // IP version 6, in the high nibble
    std::memcpy(pdata + 4, h.src6, 16);
    std::memcpy(pdata + 20, h.dst6, 16);
    return;
  }
  pdata[1] = 0x40;  // IP version 4, in the high nibble
  std::memcpy(pdata + 16, &h.src_addr, 4);  // the last 4 bytes of a 16-byte field
  std::memcpy(pdata + 32, &h.dst_addr, 4);
}

CmaHdr DecodeCmaHdr(const uint8_t* pdata) {
  CmaHdr h;
  std::memcpy(&h.src_port, pdata + 2, 2);
  if ((pdata[1] >> 4) == 6) {
    h.ipv6 = true;
    std::memcpy(h.src6, pdata + 4, 16);
    std::memcpy(h.dst6, pdata + 20, 16);
    return h;
  }
  std::memcpy(&h.src_addr, pdata + 16, 4);
  std::memcpy(&h.dst_addr, pdata + 32, 4);
  return h;
}

}  // namespace softrnic::rdmacm
