// IBA CM MADs (IBA 1.4 ch. 12, 13.4): the 24-byte common MAD header plus the
// connection-management payload, as softrnic's librdmacm sends them on QP1
// (UD, Q_Key 0x80010000). Only the fields an RC/UD connection over RoCE needs
// are modelled; everything else is sent as zero and ignored on receipt.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softrnic::rdmacm {

constexpr uint8_t kMgmtClassCm = 0x07;
constexpr uint8_t kCmClassVersion = 2;
constexpr uint8_t kMethodSend = 0x03;

constexpr uint16_t kAttrReq = 0x0010;
constexpr uint16_t kAttrMra = 0x0011;
constexpr uint16_t kAttrRej = 0x0012;
constexpr uint16_t kAttrRep = 0x0013;
constexpr uint16_t kAttrRtu = 0x0014;
constexpr uint16_t kAttrDreq = 0x0015;
constexpr uint16_t kAttrDrep = 0x0016;
constexpr uint16_t kAttrSidrReq = 0x0017;
constexpr uint16_t kAttrSidrRep = 0x0018;

constexpr size_t kMadSize = 256;
constexpr size_t kMadHeader = 24;
constexpr uint32_t kGsiQkey = 0x80010000;

// Private data sizes (IBA table 12-? / rdma_cm's IB_CM_*_PRIVATE_DATA_SIZE).
constexpr size_t kReqPdata = 92, kRepPdata = 196, kRejPdata = 148, kRtuPdata = 224,
                 kDreqPdata = 220, kDrepPdata = 224, kSidrReqPdata = 216, kSidrRepPdata = 136;
// rdma_cm's IP header at the start of REQ / SIDR_REQ private data.
constexpr size_t kCmaHdr = 36;

// REJ reasons (IBA table 112) used here.
constexpr uint16_t kRejInvalidServiceId = 8;
constexpr uint16_t kRejTimeout = 1;
constexpr uint16_t kRejConsumer = 28;
// SIDR_REP status (IBA table 120).
constexpr uint8_t kSidrOk = 0, kSidrUnsupported = 1, kSidrReject = 2;

struct CmMsg {
  uint16_t attr = 0;
  uint64_t tid = 0;
  uint32_t local_comm_id = 0;   // REQ/REP/REJ/RTU/DREQ/DREP; SIDR request id
  uint32_t remote_comm_id = 0;
  uint64_t service_id = 0;      // REQ, SIDR_REQ, SIDR_REP
  uint32_t qkey = 0;            // REQ, REP, SIDR_REP
  uint32_t qpn = 0;             // REQ/REP local QPN, DREQ remote QPN, SIDR_REP QPN
  uint32_t starting_psn = 0;    // REQ, REP
  uint8_t responder_resources = 0, initiator_depth = 0;
  uint8_t retry_count = 0, rnr_retry_count = 0, flow_control = 0, srq = 0;
  uint8_t mtu = 3;              // IBA enum: 1=256 .. 5=4096
  uint8_t transport = 0;        // REQ: 0 RC, 1 UC, 3 UD? (we send 0 or 1)
  uint8_t local_cm_timeout = 20, remote_cm_timeout = 20, max_cm_retries = 15;
  uint8_t local_ack_timeout = 14, hop_limit = 64, traffic_class = 0;
  uint8_t sgid[16] = {}, dgid[16] = {};  // REQ primary path GIDs
  uint8_t msg_rejected = 0;     // REJ: 0 REQ, 1 REP, 2 other
  uint16_t reason = 0;          // REJ
  uint8_t sidr_status = 0;      // SIDR_REP
  uint8_t pdata[224] = {};
  size_t pdata_len = 0;         // always the full size of the message's field
};

size_t PrivateDataSize(uint16_t attr);
// The attribute ID of an encoded MAD (kMadSize bytes).
uint16_t MadAttr(const uint8_t* mad);
// Rewrites the primary path's destination GID of an encoded REQ (a
// same-host listener found after the REQ was built).
void SetReqPrimaryDgid(uint8_t* mad, const uint8_t dgid[16]);

// rdma_cm's IP header at the start of REQ / SIDR_REQ private data (IBA
// Annex A11 "RDMA IP CM Service"; kCmaHdr bytes): version 0, IPv4, the
// source port and both IPv4 addresses. Addresses and port in network byte
// order, as sockaddr_in holds them.
struct CmaHdr {
  uint32_t src_addr = 0, dst_addr = 0;  // IPv4
  uint16_t src_port = 0;
  // IP version 6 (issue 15): the 16-byte addresses instead.
  bool ipv6 = false;
  uint8_t src6[16] = {}, dst6[16] = {};
};
void EncodeCmaHdr(uint8_t* pdata, const CmaHdr& h);
CmaHdr DecodeCmaHdr(const uint8_t* pdata);
// buf: kMadSize bytes.
void EncodeCm(const CmMsg& m, uint8_t* buf);
// false if not a CM MAD we understand.
bool DecodeCm(const uint8_t* buf, size_t len, CmMsg* m);
const char* CmAttrName(uint16_t attr);

}  // namespace softrnic::rdmacm
