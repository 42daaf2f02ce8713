#include "profiler/utilization/duration_histogram.h"

#include <bit>
#include <cmath>

namespace gpuflame::profiler::utilization {

int DurationHistogram::Index(uint64_t ns) {
  if (ns < kSub) return static_cast<int>(ns);
  const int octave = 63 - std::countl_zero(ns);  // >= kSubBits
  const int i = (octave - kSubBits + 1) * kSub + static_cast<int>((ns >> (octave - kSubBits)) & (kSub - 1));
  return i < kBuckets ? i : kBuckets - 1;
}

uint64_t DurationHistogram::Lower(int i) {
  if (i < kSub) return static_cast<uint64_t>(i);
  const int octave = i / kSub - 1 + kSubBits;
  return (uint64_t{1} << octave) + (static_cast<uint64_t>(i % kSub) << (octave - kSubBits));
}

void DurationHistogram::Add(uint64_t ns) {
  buckets_[Index(ns)]++;
  count_++;
  sum_ns_ += ns;
  if (ns > max_ns_) max_ns_ = ns;
}

void DurationHistogram::Merge(const DurationHistogram& other) {
  for (int i = 0; i < kBuckets; i++) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ns_ += other.sum_ns_;
  if (other.max_ns_ > max_ns_) max_ns_ = other.max_ns_;
}

uint64_t DurationHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  if (rank >= count_) return max_ns_;  // the largest value is known exactly
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; i++) {
    seen += buckets_[i];
    if (seen >= rank && buckets_[i]) {
      const uint64_t lo = Lower(i), hi = i + 1 < kBuckets ? Lower(i + 1) : max_ns_ + 1;
      const uint64_t mid = lo + (hi - lo) / 2;
      return mid < max_ns_ ? mid : max_ns_;  // never past the largest value seen
    }
  }
  return max_ns_;
}

}  // namespace gpuflame::profiler::utilization
