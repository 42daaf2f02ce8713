// Rate limit for launch stacks: |rate| tokens per second, up to |burst|
// saved. One bucket per thread (no atomics on the launch path). A launch
// without a token still has its kernel timed; the agent charges it to the
// sampled stacks of the same kernel (profiler/aggregate/kernel_joiner.h).
#ifndef GPUFLAME_CUPTI_TOKEN_BUCKET_H_
#define GPUFLAME_CUPTI_TOKEN_BUCKET_H_

#include <cstdint>

namespace gpuflame::cupti {

class TokenBucket {
 public:
  // rate 0: unlimited (every launch).
  TokenBucket(double rate_per_s, double burst) : rate_(rate_per_s / 1e9), burst_(burst), tokens_(burst) {}

  bool Take(uint64_t now_ns) {
    if (rate_ <= 0) return true;
    if (now_ns > last_ns_) {
      tokens_ += static_cast<double>(now_ns - last_ns_) * rate_;
      if (tokens_ > burst_) tokens_ = burst_;
      last_ns_ = now_ns;
    }
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double rate_;  // tokens per nanosecond
  double burst_;
  double tokens_;
  uint64_t last_ns_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_TOKEN_BUCKET_H_
