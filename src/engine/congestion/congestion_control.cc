// The congestion control settings and the choice of algorithm
// (congestion_control.h).
#include "engine/congestion/congestion_control.h"

#include <cstdlib>
#include <cstring>

namespace softrnic::engine {

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
