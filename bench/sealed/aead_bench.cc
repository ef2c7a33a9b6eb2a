// aead_bench: what one sealed packet costs one core, and what the AEADs
// issue 43 names would cost in its place (docs/sealed.md, "The cipher").
// Google Benchmark; every case processes one packet of the given payload
// per iteration, one thread:
//   QpSealSeal          softrnic's sealing of an RDMA WRITE Only (BTH +
//                       RETH as AAD, payload copied from "registered
//                       memory" while encrypted, counter and tag)
//   QpSealRoundTrip     the same packet sealed, then opened by the peer
//                       (replay window, epoch, tag check, decryption)
//   OpensslAes256Gcm    OpenSSL EVP, the call pattern of src/seal/aead.cc:
//                       a new nonce, the 28-byte AAD, the payload, the tag
//   OpensslChaCha20Poly1305  the same pattern with ChaCha20-Poly1305
//   GcryptAes256Gcm     libgcrypt, the call pattern of src/seal/aead.cc for
//                       packets of 512 bytes or more (OpenSSL's until
//                       session 38): a new nonce, the AAD, the payload, the tag
//   SodiumAes256Gcm / SodiumChaCha20Poly1305Ietf  libsodium's detached
//                       AEADs with precomputed keys (when libsodium-dev is
//                       installed; the product uses its AES-256-GCM for short packets)
// bench/sealed/sealed_bench.sh runs it beside the perftest pairs.
#include <benchmark/benchmark.h>
#include <gcrypt.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "seal/format.h"
#include "seal/qp_seal.h"

#ifdef SOFTRNIC_BENCH_SODIUM
#include <sodium.h>
#endif

namespace {

using softrnic::seal::kTrailerBytes;
using softrnic::seal::OpenResult;
using softrnic::seal::QpSeal;

constexpr uint32_t kQpnA = 0x12a4c1, kQpnB = 0x07f3e9;
constexpr uint32_t kHeader = 28;  // BTH + RETH: an RDMA WRITE Only
constexpr int kSizes[] = {8, 256, 1024, 4096};

// A WRITE Only to kQpnB with room for payload, trailer and ICRC.
std::vector<uint8_t> WritePacket(uint32_t payload) {
  std::vector<uint8_t> p(kHeader + payload + kTrailerBytes + 4, 0);
  p[0] = 0x0A;
  p[2] = p[3] = 0xFF;
  p[5] = kQpnB >> 16;
  p[6] = (kQpnB >> 8) & 0xFF;
  p[7] = kQpnB & 0xFF;
  return p;
}

void SetPsn(std::vector<uint8_t>& p, uint32_t psn) {
  p[9] = (psn >> 16) & 0xFF;
  p[10] = (psn >> 8) & 0xFF;
  p[11] = psn & 0xFF;
}

void QpSealSeal(benchmark::State& state) {
  const auto len = static_cast<uint32_t>(state.range(0));
  const std::vector<uint8_t> secret(32, 7), memory(len, 0x5A);
  auto a = QpSeal::Create(secret, kQpnA, kQpnB);
  auto packet = WritePacket(len);
  if (a == nullptr) return state.SkipWithError("QpSeal::Create failed");
  for (auto _ : state) {
    packet[1] = 0;  // TVer back to 0: Seal sets it
    if (!a->Seal(packet.data(), kHeader, memory.data(), len, 0)) return state.SkipWithError("Seal");
    benchmark::DoNotOptimize(packet.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * len);
}

void QpSealRoundTrip(benchmark::State& state) {
  const auto len = static_cast<uint32_t>(state.range(0));
  const std::vector<uint8_t> secret(32, 7), memory(len, 0x5A);
  auto a = QpSeal::Create(secret, kQpnA, kQpnB);
  auto b = QpSeal::Create(secret, kQpnB, kQpnA);
  auto packet = WritePacket(len);
  if (a == nullptr || b == nullptr) return state.SkipWithError("QpSeal::Create failed");
  uint32_t psn = 0, opened = 0;
  for (auto _ : state) {
    packet[1] = 0;
    SetPsn(packet, psn++ & 0xFFFFFF);
    if (!a->Seal(packet.data(), kHeader, memory.data(), len, 0)) return state.SkipWithError("Seal");
    if (b->Open(packet.data(), static_cast<uint32_t>(packet.size()), kHeader, &opened) != OpenResult::kOk)
      return state.SkipWithError("Open refused a packet");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * len);
}

// One EVP AEAD, used as src/seal/aead.cc uses AES-256-GCM.
void Evp(benchmark::State& state, const EVP_CIPHER* cipher) {
  const auto len = static_cast<int>(state.range(0));
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                     EVP_CIPHER_CTX_free);
  const uint8_t key[32] = {7};
  uint8_t nonce[12] = {}, aad[kHeader] = {}, tag[16];
  std::vector<uint8_t> buf(static_cast<size_t>(len), 0x5A);
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), cipher, nullptr, key, nullptr) != 1)
    return state.SkipWithError("EVP init failed");
  uint32_t counter = 0;
  for (auto _ : state) {
    ++counter;
    std::memcpy(nonce + 8, &counter, sizeof counter);
    int n = 0;
    if (EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, nullptr, nonce) != 1 ||
        EVP_EncryptUpdate(ctx.get(), nullptr, &n, aad, sizeof aad) != 1 ||
        EVP_EncryptUpdate(ctx.get(), buf.data(), &n, buf.data(), len) != 1 ||
        EVP_EncryptFinal_ex(ctx.get(), nullptr, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, sizeof tag, tag) != 1)
      return state.SkipWithError("EVP failed");
    benchmark::DoNotOptimize(tag);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * len);
}
void OpensslAes256Gcm(benchmark::State& state) { Evp(state, EVP_aes_256_gcm()); }
void OpensslChaCha20Poly1305(benchmark::State& state) { Evp(state, EVP_chacha20_poly1305()); }

// One AEAD per packet: `encrypt(buf, len, tag, aad, nonce)` seals `buf` in
// place under a new nonce; false stops the case with an error.
template <class Encrypt>
void AeadLoop(benchmark::State& state, Encrypt encrypt) {
  const auto len = static_cast<size_t>(state.range(0));
  uint8_t nonce[12] = {}, aad[kHeader] = {}, tag[16];
  std::vector<uint8_t> buf(len, 0x5A);
  uint32_t counter = 0;
  for (auto _ : state) {
    ++counter;
    std::memcpy(nonce + 8, &counter, sizeof counter);
    if (!encrypt(buf.data(), len, tag, aad, nonce)) return state.SkipWithError("seal failed");
    benchmark::DoNotOptimize(tag);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
}

void GcryptAes256Gcm(benchmark::State& state) {
  if (gcry_check_version(GCRYPT_VERSION) == nullptr)
    return state.SkipWithError("libgcrypt too old");
  gcry_cipher_hd_t h = nullptr;
  const uint8_t key[32] = {7};
  if (gcry_cipher_open(&h, GCRY_CIPHER_AES256, GCRY_CIPHER_MODE_GCM, 0) != 0)
    return state.SkipWithError("libgcrypt init failed");
  if (gcry_cipher_setkey(h, key, sizeof key) == 0) {
    AeadLoop(state, [h](uint8_t* buf, size_t len, uint8_t* tag, const uint8_t* aad,
                        const uint8_t* nonce) {
      return gcry_cipher_setiv(h, nonce, 12) == 0 &&
             gcry_cipher_authenticate(h, aad, kHeader) == 0 &&
             gcry_cipher_encrypt(h, buf, len, nullptr, 0) == 0 &&
             gcry_cipher_gettag(h, tag, 16) == 0;
    });
  } else {
    state.SkipWithError("libgcrypt setkey failed");
  }
  gcry_cipher_close(h);
}

#ifdef SOFTRNIC_BENCH_SODIUM
void SodiumAes256Gcm(benchmark::State& state) {
  if (sodium_init() < 0 || crypto_aead_aes256gcm_is_available() == 0)
    return state.SkipWithError("libsodium has no AES-256-GCM on this CPU");
  crypto_aead_aes256gcm_state st;
  const uint8_t key[32] = {7};
  crypto_aead_aes256gcm_beforenm(&st, key);
  AeadLoop(state, [&st](uint8_t* buf, size_t len, uint8_t* tag, const uint8_t* aad,
                        const uint8_t* nonce) {
    return crypto_aead_aes256gcm_encrypt_detached_afternm(buf, tag, nullptr, buf, len, aad,
                                                          kHeader, nullptr, nonce, &st) == 0;
  });
}

void SodiumChaCha20Poly1305Ietf(benchmark::State& state) {
  if (sodium_init() < 0) return state.SkipWithError("sodium_init failed");
  const uint8_t key[32] = {7};
  AeadLoop(state, [&key](uint8_t* buf, size_t len, uint8_t* tag, const uint8_t* aad,
                         const uint8_t* nonce) {
    return crypto_aead_chacha20poly1305_ietf_encrypt_detached(buf, tag, nullptr, buf, len, aad,
                                                              kHeader, nullptr, nonce, key) == 0;
  });
}
#endif

void Sizes(benchmark::internal::Benchmark* b) {
  for (int s : kSizes) b->Arg(s);
}

}  // namespace

BENCHMARK(QpSealSeal)->Apply(Sizes);
BENCHMARK(QpSealRoundTrip)->Apply(Sizes);
BENCHMARK(OpensslAes256Gcm)->Apply(Sizes);
BENCHMARK(OpensslChaCha20Poly1305)->Apply(Sizes);
BENCHMARK(GcryptAes256Gcm)->Apply(Sizes);
#ifdef SOFTRNIC_BENCH_SODIUM
BENCHMARK(SodiumAes256Gcm)->Apply(Sizes);
BENCHMARK(SodiumChaCha20Poly1305Ietf)->Apply(Sizes);
#endif

BENCHMARK_MAIN();
