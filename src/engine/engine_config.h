// EngineConfig: every setting a device is created with, typed. Device::Get
// reads it from the environment once (FromEnvironment, through the table in
// src/config/, docs/configuration.md); tests and fuzzers build one and pass
// it to Device::Create instead of calling setenv or writing Engine fields.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "config/environment.h"
#include "engine/observe/capture.h"
#include "engine/congestion/congestion_control.h"
#include "engine/types.h"
#include "seal/key_file.h"
#include "transport/factory.h"
#include "transport/transport.h"

namespace softrnic::engine {

struct EngineConfig {
  // --- The transport (SOFTRNIC_TRANSPORT, _BIND, _PORT, _FAULTS, _GSO,
  // _REPLY_SOCKET) ---
  transport::TransportMode transport_mode = transport::TransportMode::kAuto;
  transport::UdpConfig udp;

  // --- The engine ---
  // SOFTRNIC_MTU; none (`auto`): derived from the links (port_mtu.h).
  std::optional<Mtu> mtu;
  // SOFTRNIC_RETRANSMIT: whether QPs offer selective retransmission.
  bool selective = true;
  CcSettings cc;                                    // SOFTRNIC_CC, _CC_TARGET_US, _CC_DELAY
  std::chrono::microseconds ack_delay{20};          // SOFTRNIC_ACK_DELAY_US (0..500)
  bool tx_batch = true;                             // SOFTRNIC_TX_BATCH
  bool zerocopy_tx = true;                          // SOFTRNIC_ZEROCOPY_TX
  bool shm_direct = true;                           // SOFTRNIC_SHM_DIRECT
  unsigned spin_us = 0;                             // SOFTRNIC_SPIN_US
  unsigned adaptive_spin_us = 50;                   // SOFTRNIC_ADAPTIVE_SPIN_US
  bool progress_realtime = false;                   // SOFTRNIC_PROGRESS_RT
  bool placement_away = false;                      // SOFTRNIC_PLACEMENT=away

  // --- Sealed RC (docs/sealed.md) ---
  // SOFTRNIC_SEAL=require: every RC/XRC QP seals its packets with keys
  // from seal_key (SOFTRNIC_SEAL_KEY), mixed with an rdma_cm exchange where
  // there was one. Required without a key (a test's device whose key file
  // failed): such QPs refuse RTR with EACCES. prefer: only QPs whose
  // rdma_cm exchange succeeded are sealed.
  bool seal_required = false;
  bool seal_preferred = false;
  std::shared_ptr<const seal::PreSharedKey> seal_key;

  // --- Counters (Device::Get's process device only) ---
  bool stats_at_exit = false;                       // SOFTRNIC_STATS
  bool stats_shm = true;                            // SOFTRNIC_STATS_SHM
  std::string stats_dir = "/dev/shm";               // SOFTRNIC_STATS_DIR

  // --- Packet capture (capture.h) ---
  CaptureSettings capture;                          // SOFTRNIC_CAPTURE, _SIZE_MB, _FILES

  // --- Per-QP event trace (trace/trace_recorder.h) ---
  struct TraceSettings {
    std::string path;                  // SOFTRNIC_TRACE; empty: off. "%p": the pid
    size_t max_events = 1'000'000;     // events kept; later ones are counted, not kept
  } trace;

  // Reads every engine and transport variable of `env`. Returns false (and
  // sets *error) only for an unknown SOFTRNIC_TRANSPORT or SOFTRNIC_SEAL,
  // or SOFTRNIC_SEAL=require without a usable key file, which make device
  // creation fail; any other bad value is reported on stderr and keeps its
  // default.
  static bool FromEnvironment(const config::Environment& env, EngineConfig* out,
                              std::string* error);
  // The process environment, read now; an unknown SOFTRNIC_TRANSPORT is
  // reported on stderr and means auto (for tests' explicit devices); a
  // sealing error is reported and leaves sealing required without a key
  // (fail closed: RC QPs refuse RTR).
  static EngineConfig FromProcess();
};

}  // namespace softrnic::engine
