// The round-trip time of one RC QP's path, as the requester measures it.
//
// Fed by selective retransmission (selective.cc): a sample is the time from
// a packet's only transmission to the first acknowledgement that covers it,
// cumulative or SACK (Karn's rule: a resent packet gives none). Read by the
// QP's congestion controller (congestion_control.h) and by the tail-loss
// probe timer. Without a selective scoreboard (go-back-N) nothing is
// measured and every value stays 0.
//
// Thread-safety: none of its own; it lives in the Qp, under the engine lock.
#pragma once

#include <algorithm>

namespace softrnic::engine {

class RttEstimator {
 public:
  // The smoothing of RFC 6298 (alpha 1/8); the first sample is taken whole.
  void AddSample(double us) {
    srtt_us_ = srtt_us_ == 0 ? us : srtt_us_ * 0.875 + us * 0.125;
    last_us_ = us;
    min_us_ = min_us_ == 0 ? us : std::min(min_us_, us);
  }
  // Forgets every sample (a QP entering RTS starts over).
  void Reset() { *this = RttEstimator{}; }

  double srtt_us() const { return srtt_us_; }  // smoothed; 0 = no sample yet
  double last_us() const { return last_us_; }  // the latest sample
  double min_us() const { return min_us_; }    // the path's base RTT

 private:
  double srtt_us_ = 0;
  double last_us_ = 0;
  double min_us_ = 0;
};

}  // namespace softrnic::engine
