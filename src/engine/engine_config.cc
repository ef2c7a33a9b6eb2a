#include "engine/engine_config.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace softrnic::engine {

namespace {

// Everything but SOFTRNIC_TRANSPORT.
EngineConfig ReadSettings(const config::Environment& env) {
  EngineConfig c;
  c.udp = transport::UdpConfigFromEnvironment(env);

  const std::string mtu = env.Choice("SOFTRNIC_MTU");  // "auto": none
  for (Mtu v : {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096})
    if (std::to_string(MtuBytes(v)) == mtu) c.mtu = v;
  c.selective = env.Choice("SOFTRNIC_RETRANSMIT") != "gbn";
  const std::string cc = env.Choice("SOFTRNIC_CC");
  c.cc.enabled = cc != "0";
  c.cc.algorithm = cc == "delay" ? CcAlgorithm::kDelayWindow : CcAlgorithm::kAimdWindow;
  c.cc.target_us = env.Number("SOFTRNIC_CC_TARGET_US");
  c.cc.aimd_delay_cuts = env.Flag("SOFTRNIC_CC_DELAY");
  // Longer waits than 500 us only delay loss recovery (ack_delay.cc).
  c.ack_delay = std::chrono::microseconds(std::min(env.Integer("SOFTRNIC_ACK_DELAY_US"), 500L));
  c.tx_batch = env.Flag("SOFTRNIC_TX_BATCH");
  c.zerocopy_tx = env.Flag("SOFTRNIC_ZEROCOPY_TX");
  c.shm_direct = env.Flag("SOFTRNIC_SHM_DIRECT");
  c.spin_us = static_cast<unsigned>(env.Integer("SOFTRNIC_SPIN_US"));
  c.adaptive_spin_us = static_cast<unsigned>(env.Integer("SOFTRNIC_ADAPTIVE_SPIN_US"));
  c.progress_realtime = env.Flag("SOFTRNIC_PROGRESS_RT");
  c.placement_away = env.Choice("SOFTRNIC_PLACEMENT") == "away";

  c.stats_at_exit = env.Flag("SOFTRNIC_STATS");
  c.stats_shm = env.Flag("SOFTRNIC_STATS_SHM");
  c.stats_dir = env.Text("SOFTRNIC_STATS_DIR");
  c.capture.path = env.Text("SOFTRNIC_CAPTURE");
  c.capture.max_file_bytes = static_cast<uint64_t>(env.Integer("SOFTRNIC_CAPTURE_SIZE_MB")) << 20;
  c.capture.files = static_cast<unsigned>(env.Integer("SOFTRNIC_CAPTURE_FILES"));
  c.trace.path = env.Text("SOFTRNIC_TRACE");
  return c;
}

// SOFTRNIC_SEAL and SOFTRNIC_SEAL_KEY. False with *error for a value that
// must stop the device: an unknown mode, or `require` without a usable key.
bool ReadSeal(const config::Environment& env, EngineConfig* c, std::string* error) {
  std::string mode;
  if (!env.StrictChoice("SOFTRNIC_SEAL", &mode, error)) {
    c->seal_required = true;  // fail closed
    return false;
  }
  c->seal_required = mode == "require";
  c->seal_preferred = mode == "prefer";
  if (!c->seal_required && !c->seal_preferred) return true;
  const std::string path = env.Text("SOFTRNIC_SEAL_KEY");
  if (path.empty() || path == "none") {
    if (c->seal_preferred) return true;  // rdma_cm exchanges, unauthenticated
    *error = "SOFTRNIC_SEAL=require needs SOFTRNIC_SEAL_KEY (docs/sealed.md)";
    return false;
  }
  c->seal_key = seal::LoadKeyFile(path, error);
  return c->seal_key != nullptr;
}

}  // namespace

bool EngineConfig::FromEnvironment(const config::Environment& env, EngineConfig* out,
                                   std::string* error) {
  std::string mode;
  if (!env.StrictChoice("SOFTRNIC_TRANSPORT", &mode, error)) return false;
  *out = ReadSettings(env);
  transport::ParseTransportMode(mode.c_str(), &out->transport_mode);
  return ReadSeal(env, out, error);
}

EngineConfig EngineConfig::FromProcess() {
  const config::Environment env = config::Environment::FromProcess();
  EngineConfig c = ReadSettings(env);
  std::string mode, error;
  if (env.StrictChoice("SOFTRNIC_TRANSPORT", &mode, &error))
    transport::ParseTransportMode(mode.c_str(), &c.transport_mode);
  else
    std::fprintf(stderr, "%s; using auto\n", error.c_str());
  if (!ReadSeal(env, &c, &error))
    std::fprintf(stderr, "%s; sealed RC queue pairs will refuse to connect\n", error.c_str());
  return c;
}

}  // namespace softrnic::engine
