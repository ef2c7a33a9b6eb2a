#include "faults/fault_events.h"

namespace softrnic::faults {

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kDrop: return "drop";
    case FaultKind::kOutage: return "outage";
    case FaultKind::kRateDrop: return "rate-drop";
    case FaultKind::kPauseDrop: return "pause-drop";
    case FaultKind::kDuplicate: return "duplicate";
    case FaultKind::kCorrupt: return "corrupt";
    case FaultKind::kReorder: return "reorder";
    case FaultKind::kDelay: return "delay";
    case FaultKind::kPause: return "pause";
    case FaultKind::kEcnMark: return "ecn-mark";
  }
  return "?";
}

}  // namespace softrnic::faults
