// Sealed RC's key exchange through rdma_cm (docs/sealed.md, "The
// exchange"): an ephemeral X25519 public key at the end of the REQ's
// private data (the offer) and of the REP's (the answer); each side hands
// the X25519 output and the transcript (the offer's key, then the
// answer's) to its device for the QP before RTR (softrnic_seal_qp), where
// the key file, if any, is mixed in. A REQ or REP without the block (a
// plain or older peer, or an application's private data that leaves no
// room) is plain under `prefer`; under `require` the connection is
// refused with a REJ whose private data says why (kSealRefusal), and
// the refusing side's call or event fails with EACCES.
#include <cstring>

#include <openssl/crypto.h>

#include "rdmacm/cm_internal.h"
#include "rdmacm/cma.h"

namespace softrnic::rdmacm {
namespace {

constexpr uint8_t kMagic[4] = {'S', 'R', 'S', '1'};
constexpr size_t kBlock = sizeof kMagic + seal::kX25519Bytes;  // 36

int ModeOf(const Id* id) {
  return id->id.verbs != nullptr ? softrnic_seal_mode(id->id.verbs) : 0;
}

// The block's place: the last kBlock bytes of a private-data field.
uint8_t* BlockIn(uint8_t* pdata, size_t field_len) { return pdata + field_len - kBlock; }
const uint8_t* BlockIn(const uint8_t* pdata, size_t field_len) {
  return pdata + field_len - kBlock;
}
bool HasBlock(const uint8_t* pdata, size_t field_len) {
  return std::memcmp(BlockIn(pdata, field_len), kMagic, sizeof kMagic) == 0;
}
void PutBlock(uint8_t* pdata, size_t field_len, const uint8_t* key) {
  uint8_t* b = BlockIn(pdata, field_len);
  std::memcpy(b, kMagic, sizeof kMagic);
  std::memcpy(b + sizeof kMagic, key, seal::kX25519Bytes);
}

constexpr int kRequire = 2;  // softrnic_seal_mode: 0 off, 1 prefer, 2 require

// Keys the QP from our key and the peer's: transcript = offer, answer.
int KeyQp(Id* id, const uint8_t* peer, bool we_offered) {
  uint8_t shared[seal::kX25519Bytes];
  uint8_t transcript[2 * seal::kX25519Bytes];
  const uint8_t* mine = id->seal_key->public_key();
  std::memcpy(transcript, we_offered ? mine : peer, seal::kX25519Bytes);
  std::memcpy(transcript + seal::kX25519Bytes, we_offered ? peer : mine, seal::kX25519Bytes);
  // An all-zero X25519 output (a low-order point from the peer) fails
  // Derive: under require that refuses, under prefer the QP's RTR then
  // finds neither a secret nor a declined seal and stays plain.
  int rc = id->seal_key->Derive(peer, shared)
               ? softrnic_seal_qp(id->id.qp, shared, sizeof shared, transcript, sizeof transcript)
               : (ModeOf(id) == kRequire ? EACCES : 0);
  OPENSSL_cleanse(shared, sizeof shared);
  return rc;
}

// The peer offered or answered nothing: plain under prefer; the device
// refuses it (EACCES, counted as cm_seal_refused) under require.
int Declined(Id* id) { return softrnic_seal_qp(id->id.qp, nullptr, 0, nullptr, 0); }

}  // namespace

int SealOffer(Id* id, CmMsg* req, size_t user_len) {
  const int mode = ModeOf(id);
  if (mode <= 0) return 0;
  // Under require a REQ without the offer could only be refused.
  if (kCmaHdr + user_len + kBlock > kReqPdata) return mode == kRequire ? EMSGSIZE : 0;
  auto key = std::make_unique<seal::EphemeralX25519>();
  if (!key->ok()) return mode == kRequire ? EIO : 0;
  PutBlock(req->pdata, kReqPdata, key->public_key());
  req->pdata_len = kReqPdata;
  id->seal_key = std::move(key);
  return 0;
}

int SealTakeAnswer(Id* id, const CmMsg& rep) {
  if (id->id.qp == nullptr || ModeOf(id) <= 0) return 0;
  if (id->seal_key == nullptr || !HasBlock(rep.pdata, kRepPdata)) return Declined(id);
  return KeyQp(id, BlockIn(rep.pdata, kRepPdata) + sizeof kMagic, /*we_offered=*/true);
}

void SealNoteOffer(Id* id, const CmMsg& req) {
  id->seal_offered = HasBlock(req.pdata, kReqPdata);
  if (id->seal_offered)
    std::memcpy(id->seal_peer.data(), BlockIn(req.pdata, kReqPdata) + sizeof kMagic,
                seal::kX25519Bytes);
}

int SealAnswer(Id* id, CmMsg* rep, size_t user_len) {
  if (id->id.qp == nullptr || ModeOf(id) <= 0) return 0;
  // No offer, or no room for the answer (the peer then sees none either).
  if (!id->seal_offered || user_len + kBlock > kRepPdata) return Declined(id);
  id->seal_key = std::make_unique<seal::EphemeralX25519>();
  if (!id->seal_key->ok()) return Declined(id);
  if (int rc = KeyQp(id, id->seal_peer.data(), /*we_offered=*/false)) return rc;
  PutBlock(rep->pdata, kRepPdata, id->seal_key->public_key());
  rep->pdata_len = kRepPdata;
  return 0;
}

void SealHideBlock(uint8_t* pdata, size_t field_len) {
  if (HasBlock(pdata, field_len)) std::memset(BlockIn(pdata, field_len), 0, kBlock);
}

}  // namespace softrnic::rdmacm
