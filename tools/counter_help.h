// One sentence per counter of the stats files (src/engine/observe/stats.cc,
// FormatStats), for the HELP lines of `softrnic stat --prometheus`.
#pragma once

#include <string>

namespace softrnic::tools {

// What the counter `name` counts; for a counter this table does not know
// (added to the engine later) a generic sentence naming it.
std::string CounterHelp(const std::string& name);

// The same for a per-QP counter (engine/qp_counters.h, "qp" lines).
std::string QpCounterHelp(const std::string& name);

}  // namespace softrnic::tools
