// Which launches get a stack: each with probability p, where p is the
// wanted rate over this thread's own launch rate (measured every kWindow
// launches), under a token bucket that caps bursts. A token bucket alone
// takes the first launches after each idle spell and starves the rest:
// in a training step the same optimizer kernels always came last in the
// main thread's burst after backward() and were never sampled, so their time
// had no stack. Random thinning gives every launch the same chance. One per
// thread (no atomics on the launch path).
#ifndef GPUFLAME_CUPTI_LAUNCH_SAMPLER_H_
#define GPUFLAME_CUPTI_LAUNCH_SAMPLER_H_

#include <algorithm>
#include <cstdint>

#include "cupti/token_bucket.h"

namespace gpuflame::cupti {

class LaunchSampler {
 public:
  // rate 0: every launch.
  LaunchSampler(double rate_per_s, uint64_t seed)
      : rate_(rate_per_s), bucket_(rate_per_s, rate_per_s > 0 ? rate_per_s / 2 + 1 : 1), rng_(seed | 1) {}

  bool Take(uint64_t now_ns) {
    if (rate_ <= 0) return true;
    if (++seen_ >= kWindow) {
      if (window_start_ns_ && now_ns > window_start_ns_) {
        const double launches_per_s = static_cast<double>(seen_) * 1e9 / static_cast<double>(now_ns - window_start_ns_);
        p_ = std::min(1.0, rate_ / launches_per_s);
      }
      window_start_ns_ = now_ns;
      seen_ = 0;
    }
    if (p_ < 1 && Uniform() >= p_) return false;
    return bucket_.Take(now_ns);
  }
  double probability() const { return p_; }

  static constexpr uint32_t kWindow = 256;

 private:
  // xorshift64*, top 53 bits as a double in [0, 1).
  double Uniform() {
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return static_cast<double>((rng_ * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
  }

  double rate_;
  TokenBucket bucket_;
  uint64_t rng_;
  double p_ = 1;
  uint32_t seen_ = 0;
  uint64_t window_start_ns_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_LAUNCH_SAMPLER_H_
