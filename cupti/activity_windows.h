// Which weight a CUPTI activity record carries: the duty cycle's weight of
// the window its work was launched in. Windows open on the flusher thread
// (ActivityOn, with CUPTI's timestamp of the moment activity was enabled);
// records are converted later, on whichever thread CUPTI completes a buffer,
// and a kernel launched in a window may start on the GPU after that window
// closed, so each record takes the weight of the last window that opened at
// or before its start. Only kernels launched while activity was on have
// records at all. Thread-safe.
#ifndef GPUFLAME_CUPTI_ACTIVITY_WINDOWS_H_
#define GPUFLAME_CUPTI_ACTIVITY_WINDOWS_H_

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace gpuflame::cupti {

class ActivityWindows {
 public:
  // Activity went on at |begin_ns| (CUPTI's clock), each record worth |weight|.
  void Open(uint64_t begin_ns, uint16_t weight) {
    std::lock_guard<std::mutex> lock(mu_);
    ring_[next_ % kWindows] = {begin_ns, weight ? weight : uint16_t{1}};
    next_++;
  }

  uint16_t WeightAt(uint64_t start_ns) const {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = next_ < kWindows ? next_ : kWindows;
    // Newest first; buffers complete within seconds, windows last a second
    // or more, so a record older than the ring's oldest window is rare: it
    // takes that window's weight.
    for (size_t i = 1; i <= n; i++) {
      const Window& w = ring_[(next_ - i) % kWindows];
      if (w.begin_ns <= start_ns || i == n) return w.weight;
    }
    return 1;
  }

 private:
  static constexpr size_t kWindows = 16;
  struct Window {
    uint64_t begin_ns = 0;
    uint16_t weight = 1;
  };
  mutable std::mutex mu_;
  Window ring_[kWindows];
  size_t next_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_ACTIVITY_WINDOWS_H_
