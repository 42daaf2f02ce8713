// Kernel durations as a log-linear histogram, for their distribution
// (P50/P95, the share of short kernels, the HTML page's histogram) in fixed
// memory whatever the run's length.
//
// Each power of two is cut into 16 buckets, so a percentile is read to
// within 1/32 of its value (the bucket's middle is reported); the count, the
// sum and the maximum are exact. HdrHistogram does the same; its C library
// is not in Debian, and the 60 lines here need nothing it adds.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_UTILIZATION_DURATION_HISTOGRAM_H_
#define GPUFLAME_PROFILER_UTILIZATION_DURATION_HISTOGRAM_H_

#include <array>
#include <cstdint>

namespace gpuflame::profiler::utilization {

class DurationHistogram {
 public:
  static constexpr int kSubBits = 4;  // 16 buckets per power of two
  static constexpr int kSub = 1 << kSubBits;
  // Values up to 2^44 ns (4.9 hours); longer ones fall in the last bucket.
  static constexpr int kBuckets = (44 - kSubBits + 1) * kSub + kSub;

  void Add(uint64_t ns);
  void Merge(const DurationHistogram& other);
  // The |q|-quantile (0 < q <= 1), the middle of its bucket; 0 when empty.
  uint64_t Quantile(double q) const;

  uint64_t count() const { return count_; }
  uint64_t sum_ns() const { return sum_ns_; }
  uint64_t max_ns() const { return max_ns_; }
  // Bucket |i|'s range [lower, upper).
  static uint64_t Lower(int i);
  static uint64_t Upper(int i) { return i + 1 < kBuckets ? Lower(i + 1) : UINT64_MAX; }
  static int Index(uint64_t ns);
  uint64_t bucket(int i) const { return buckets_[i]; }

 private:
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ns_ = 0;
  uint64_t max_ns_ = 0;
};

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_DURATION_HISTOGRAM_H_
