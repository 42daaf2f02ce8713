// Poisson sampling by bytes, as Perfetto's heapprofd (src/profiling/memory/
// sampler.h) and tcmalloc sample heaps: the allocated bytes form a stream,
// sample points fall on it at exponentially distributed gaps of mean
// |interval|, and an allocation holding k points stands for k x |interval|
// bytes. One of at least |interval| bytes is always taken and stands for
// itself. Either way the bytes an allocation stands for are, on average, its
// own: totals stay unbiased, big allocations stay exact, and the cost of a
// stack walk is paid about once per |interval| bytes of small ones.
// Written here, not taken from a library: it runs under PyTorch's allocator
// lock, so it may not allocate, lock or touch thread-local storage.
#ifndef GPUFLAME_INPROCESS_BYTE_SAMPLER_H_
#define GPUFLAME_INPROCESS_BYTE_SAMPLER_H_

#include <cmath>
#include <cstdint>

namespace gpuflame::inprocess {

class ByteSampler {
 public:
  // |interval| 0: every allocation is taken and stands for itself.
  ByteSampler(uint64_t interval, uint64_t seed) : interval_(interval), rng_(seed | 1) { until_next_ = Gap(); }

  // The bytes an allocation of |size| stands for if taken, else 0. Not
  // thread-safe: the caller serializes.
  uint64_t Sample(uint64_t size) {
    if (interval_ == 0 || size >= interval_) return size;
    until_next_ -= static_cast<int64_t>(size);
    if (until_next_ > 0) return 0;
    uint64_t points = 0;
    // Bounded: each gap is at least one byte and the deficit is under |interval|.
    while (until_next_ <= 0) {
      until_next_ += Gap();
      points++;
    }
    return points * interval_;
  }

  // Passes over an allocation of |size| that Sample would not take, and
  // says so; else changes nothing (Sample then decides it). The tensor
  // hook's quick path (tensor_events.cc).
  bool SkipIfNotTaken(uint64_t size) {
    if (interval_ == 0 || size >= interval_ || until_next_ <= static_cast<int64_t>(size)) return false;
    until_next_ -= static_cast<int64_t>(size);
    return true;
  }
  // The interval from now on (hook_budget.h scales the configured one). The
  // distance to the next point is drawn again, at the new mean: an
  // exponential gap has no memory, so the estimate stays unbiased. A
  // sampler that takes every allocation (interval 0) stays one.
  void SetInterval(uint64_t interval) {
    if (interval_ == 0 || interval == 0 || interval == interval_) return;
    interval_ = interval;
    until_next_ = Gap();
  }

  uint64_t interval() const { return interval_; }

 private:
  // An exponential gap of mean |interval_|, at least one byte.
  int64_t Gap() {
    if (interval_ == 0) return 1;
    // xorshift64*: 53 random bits give u in (0, 1].
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    const double u = static_cast<double>(((rng_ * 0x2545F4914F6CDD1Dull) >> 11) + 1) * 0x1.0p-53;
    const double gap = -std::log(u) * static_cast<double>(interval_);
    return gap < 1 ? 1 : gap > 1e15 ? static_cast<int64_t>(1e15) : static_cast<int64_t>(gap);
  }

  // 24 bytes: the hook keeps it on its one hot cache line (tensor_events.cc).
  uint64_t interval_;
  uint64_t rng_;
  int64_t until_next_ = 0;
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_BYTE_SAMPLER_H_
