// The congestion control settings and the choice of algorithm
// (congestion_control.h).
#include "engine/congestion_control.h"

#include <cstdlib>
#include <cstring>

namespace softrnic::engine {

CcSettings CcSettings::FromEnv() {
  CcSettings s;
  if (const char* cc = std::getenv("SOFTRNIC_CC")) {
    if (std::strcmp(cc, "0") == 0) s.enabled = false;
    if (std::strcmp(cc, "delay") == 0) s.algorithm = CcAlgorithm::kDelayWindow;
  }
  if (const char* t = std::getenv("SOFTRNIC_CC_TARGET_US"); t && std::atof(t) > 0)
    s.target_us = std::atof(t);
  if (const char* d = std::getenv("SOFTRNIC_CC_DELAY"); d && *d != '\0')
    s.aimd_delay_cuts = std::strcmp(d, "0") != 0;
  return s;
}

std::unique_ptr<CongestionControl> MakeCongestionControl(const CcSettings& settings,
                                                         const RttEstimator& rtt,
                                                         EngineStats& stats) {
  switch (settings.algorithm) {
    case CcAlgorithm::kDelayWindow:
      return MakeDelayWindow(settings, rtt, stats);
    case CcAlgorithm::kAimdWindow:
      break;
  }
  return MakeAimdWindow(settings, rtt, stats);
}

}  // namespace softrnic::engine
