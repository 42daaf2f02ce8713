// Time-valued samples per stack: CPU time (ticks of the sampling clock) and
// GPU kernel time (nanoseconds and launches, per launch stack + kernel).
// Cumulative totals for `record`, and per-window deltas for the agent, keyed
// by (stack, label) where the label is an optional thread name.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_AGGREGATE_TIME_TRACKER_H_
#define GPUFLAME_PROFILER_AGGREGATE_TIME_TRACKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

struct TimeCounters {
  int64_t count = 0;  // samples, or kernel executions
  int64_t nanos = 0;  // CPU time, or GPU time
  // GPU time actually seen: |nanos| is an estimate, scaled up from it, where
  // the library duty-cycled CUPTI activity (gf_kernel_record.weight).
  int64_t observed_nanos = 0;
};

struct TimeKey {
  StackId stack = 0;
  uint32_t label = 0;  // index into labels(); 0: none
  bool operator==(const TimeKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const TimeKey& k) {
    return H::combine(std::move(h), k.stack, k.label);
  }
};

class TimeTracker {
 public:
  TimeTracker() : labels_{""} {}
  // |observed_nanos| < 0: all of |nanos| was seen.
  void Add(StackId stack, uint32_t label, int64_t count, int64_t nanos, int64_t observed_nanos = -1);
  // Index of |label| (interned; 0 is "no label").
  uint32_t Label(const std::string& label);
  const std::string& label(uint32_t id) const { return labels_[id]; }

  const absl::flat_hash_map<TimeKey, TimeCounters>& totals() const { return totals_; }
  // What was added since the previous call, and a fresh window.
  absl::flat_hash_map<TimeKey, TimeCounters> TakeWindow();
  // Forgets retired stacks (see StackTable::Retire).
  void Forget(const std::vector<StackId>& ids);
  size_t window_size() const { return window_.size(); }

 private:
  absl::flat_hash_map<TimeKey, TimeCounters> totals_;
  absl::flat_hash_map<TimeKey, TimeCounters> window_;
  std::vector<std::string> labels_;
  absl::flat_hash_map<std::string, uint32_t> label_ids_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_TIME_TRACKER_H_
