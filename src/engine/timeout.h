// A deadline as the relative timeout of ppoll/epoll_pwait2.
#pragma once

#include <ctime>

#include <algorithm>
#include <chrono>

#include "engine/types.h"

namespace softrnic::engine {

// The time left until `deadline` (none left: zero) in `storage`, or
// nullptr (wait without a timeout) when there is no deadline.
inline const timespec* TimeoutUntil(Clock::time_point deadline, timespec* storage) {
  if (deadline == Clock::time_point::max()) return nullptr;
  const auto left = std::max<Clock::duration>(Clock::duration::zero(), deadline - Clock::now());
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  storage->tv_sec = static_cast<time_t>(ns / 1000000000);
  storage->tv_nsec = static_cast<long>(ns % 1000000000);
  return storage;
}

}  // namespace softrnic::engine
