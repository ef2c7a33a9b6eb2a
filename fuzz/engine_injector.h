// Test-only entry points into a live engine for the fuzzers: inject a
// received packet without sockets, and replace the UDP transport with one
// that records what the engine transmits instead of sending it.
//
// Everything here uses Engine's public members (Device::engine(),
// Engine::DispatchPacket, Engine::transport_, Engine::mu_); no engine file
// is changed for it. Not for production use: swapping the transport is only
// safe after StopProgressThread(), which DetachTransport() does.
//
// Thread-safety: Inject() and the helpers take the engine lock themselves;
// call them from one thread (the fuzzer's).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "engine/device/device.h"
#include "engine/engine.h"
#include "tests/unit/engine/engine_test_peer.h"
#include "transport/transport.h"

namespace softrnic::fuzz {

// A transport with the same local endpoints as the one it replaces, that
// never touches a socket: transmitted packets are kept (copied) until
// Clear(), so a fuzzer can check what the engine sent.
class RecordingTransport final : public transport::Transport {
 public:
  // groups: the replaced transport's max_multicast_groups(), which the
  // device already reports.
  RecordingTransport(std::span<const transport::Endpoint> locals, uint32_t groups)
      : locals_(locals.begin(), locals.end()), groups_(groups) {}

  std::span<const transport::Endpoint> locals() const override { return locals_; }
  int SendBurst(const transport::TxPacket* packets, int n) override {
    for (int i = 0; i < n; ++i) {
      ++counters_.tx_packets;
      counters_.tx_bytes += packets[i].length;
      if (sent_.size() < kKeep)
        sent_.emplace_back(packets[i].data, packets[i].data + packets[i].length);
    }
    return n;
  }
  int RecvBurst(transport::RxPacket*, int) override { return 0; }
  int pollable_fd() const override { return -1; }
  const transport::TransportCounters& counters() const override { return counters_; }
  // Groups need no socket here: the fuzzer hands their packets in itself.
  int JoinMulticast(const transport::Gid&) override { return 0; }
  uint32_t max_multicast_groups() const override { return groups_; }

  const std::vector<std::vector<uint8_t>>& sent() const { return sent_; }
  void Clear() { sent_.clear(); }

 private:
  static constexpr size_t kKeep = 4096;
  std::vector<transport::Endpoint> locals_;
  uint32_t groups_;
  std::vector<std::vector<uint8_t>> sent_;
  transport::TransportCounters counters_;
};

// Stops the device's progress thread (so the fuzzer is the only thread in
// the engine and runs are deterministic) and swaps its UDP transport for a
// RecordingTransport. Returns the new transport (owned by the engine).
inline RecordingTransport* DetachTransport(engine::Device& device) {
  engine::Engine& e = device.engine();
  e.StopProgressThread();
  // DrainAsyncEvents reads the event pipe; it must never block.
  const int async_fd = device.async_fd();
  fcntl(async_fd, F_SETFL, fcntl(async_fd, F_GETFL) | O_NONBLOCK);
  engine::SpinLock lock(e.mu_);
  const transport::Transport& old = engine::EngineTestPeer::transport(e);
  auto rec = std::make_unique<RecordingTransport>(old.locals(), old.max_multicast_groups());
  RecordingTransport* raw = rec.get();
  engine::EngineTestPeer::ReplaceTransport(e, std::move(rec));
  return raw;
}

// Delivers one packet (BTH .. ICRC, ICRC assumed verified) as if the
// transport had received it from `src`, then runs what the progress pass
// runs after a receive burst: the work list (coalesced ACKs, requesters)
// and the transmit flush. `group`: as if it arrived for that joined
// multicast group (RxPacket::group). `via_shm`: as if through a same-host
// shared-memory ring (RxPacket::via_shm: placement bits honoured).
inline void Inject(engine::Device& device, uint8_t* data, uint32_t length,
                   const transport::Endpoint& src, uint16_t local_index = 0,
                   uint8_t traffic_class = 0, const transport::Gid* group = nullptr,
                   bool via_shm = false) {
  engine::Engine& e = device.engine();
  transport::RxPacket rx;
  rx.data = data;
  rx.length = length;
  rx.local_index = local_index;
  rx.src = src;
  rx.traffic_class = traffic_class;
  rx.group = group;
  rx.via_shm = via_shm;
  engine::SpinLock lock(e.mu_);
  engine::EngineTestPeer::Dispatch(e, rx);
  engine::EngineTestPeer::RunWork(e);
  engine::EngineTestPeer::FlushTx(e);
}

// Runs the timers of every QP with one armed (the engine's timer list, as
// its periodic check does) as if `ahead` had passed (retransmit timeouts,
// RNR waits), then the work list and the transmit flush.
inline void FireTimers(engine::Device& device, engine::Clock::duration ahead) {
  engine::Engine& e = device.engine();
  engine::SpinLock lock(e.mu_);
  const engine::Clock::time_point when = engine::Clock::now() + ahead;
  engine::EngineTestPeer::FireTimers(e, when);
  engine::EngineTestPeer::RunWork(e);
  engine::EngineTestPeer::FlushTx(e);
}

// Discards queued async events (the engine keeps them until the application
// reads them; a fuzzer never does).
inline void DrainAsyncEvents(engine::Device& device) {
  // No router is installed here, so every event is in the device's queue,
  // whose fd DetachTransport made non-blocking.
  engine::AsyncEvent event;
  while (device.GetAsyncEvent(&event) == 0) {
  }
}

}  // namespace softrnic::fuzz
