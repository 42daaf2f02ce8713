// Keeps what the sampling interval controls of the in-process tensor hook's
// cost, the taken allocations' stack walks and records (about size /
// interval of them), under a share of its process's CPU time
// (GPUFLAME_TENSOR_HOOK_BUDGET) by coarsening the interval of sampled runs:
// doubling it about halves their number. The rest of the hook's cost, a
// lock and a few cache lines on every allocator event (0.07-0.2 us each
// on an H100 host's launch-bound step), no interval changes, so it is not
// counted here: coarsening for it would widen the estimates for nothing.
// Each taken allocation carries what it stands for, so every estimate stays
// unbiased at any interval: only its spread grows, and the interval in use
// is announced to the agent (summary.json's tensor_sample_bytes, per process).
//
// As the agent's guardrails do: the share is over the last 10 s, a step is
// taken at most every 10 s, and one is taken back only after 30 s under a
// quarter of the budget, so the interval does not oscillate. Exact runs
// (record's default, a process's start-up) are not governed: they asked
// for every allocation.
// Not thread-safe: the library's flusher thread only.
#ifndef GPUFLAME_INPROCESS_HOOK_BUDGET_H_
#define GPUFLAME_INPROCESS_HOOK_BUDGET_H_

#include <cstddef>
#include <cstdint>

namespace gpuflame::inprocess {

class HookBudget {
 public:
  static constexpr uint64_t kWindowNs = 10'000'000'000;
  static constexpr uint64_t kStepEveryNs = 10'000'000'000;
  static constexpr uint64_t kRecoverNs = 30'000'000'000;
  static constexpr uint32_t kMaxScale = 64;  // 4 MiB -> 256 MiB at most

  // |max_share| of the process's CPU (0.005: 0.5%); 0 or less: never acts.
  explicit HookBudget(double max_share) : max_share_(max_share) {}

  // A tick (the flusher's, every 100 ms): the taken allocations' time and
  // the process's CPU time so far. Returns the interval's scale from now on (1, 2, 4 ...).
  uint32_t Tick(uint64_t now_ns, uint64_t taken_ns, uint64_t cpu_ns) {
    if (max_share_ <= 0) return scale_;
    reads_[next_ % kReads] = {now_ns, taken_ns, cpu_ns};
    next_++;
    // The oldest read at least a window back, if there is one.
    const Read* from = nullptr;
    for (size_t i = 1; i < kReads && i < next_; i++) {
      const Read& r = reads_[(next_ - 1 - i) % kReads];
      if (now_ns - r.at_ns >= kWindowNs) {
        from = &r;
        break;
      }
    }
    // At least 10 ms of CPU in it: a share of almost nothing is noise.
    if (!from || cpu_ns < from->cpu_ns + 10'000'000 || taken_ns < from->taken_ns) return scale_;
    share_ = static_cast<double>(taken_ns - from->taken_ns) / static_cast<double>(cpu_ns - from->cpu_ns);
    if (share_ > max_share_) {
      under_since_ns_ = 0;
      if (scale_ < kMaxScale && now_ns - stepped_ns_ >= kStepEveryNs) {
        scale_ *= 2;
        stepped_ns_ = now_ns;
      }
    } else if (share_ < max_share_ / 4 && scale_ > 1) {
      if (!under_since_ns_) under_since_ns_ = now_ns;
      if (now_ns - under_since_ns_ >= kRecoverNs && now_ns - stepped_ns_ >= kStepEveryNs) {
        scale_ /= 2;
        stepped_ns_ = now_ns;
        under_since_ns_ = now_ns;
      }
    } else {
      under_since_ns_ = 0;
    }
    return scale_;
  }

  // Not governed for a while (exact, or no agent): the next window starts
  // after it, its scale kept.
  void Pause() {
    next_ = 0;
    under_since_ns_ = 0;
  }

  uint32_t scale() const { return scale_; }
  double share() const { return share_; }  // over the last window, 0 until there is one

 private:
  struct Read {
    uint64_t at_ns, taken_ns, cpu_ns;
  };
  // 100 ms ticks: 16 s of them, more than a window.
  static constexpr size_t kReads = 160;

  double max_share_;
  Read reads_[kReads] = {};
  size_t next_ = 0;
  uint32_t scale_ = 1;
  uint64_t stepped_ns_ = 0;
  uint64_t under_since_ns_ = 0;
  double share_ = 0;
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_HOOK_BUDGET_H_
