// Leaks and sustained growth: each stack's in-use bytes sampled at interval
// boundaries over a run whose length is not known in advance, and the stacks
// that grew in a clear majority of intervals by a material amount.
//
// The event loop calls Tick; a boundary is taken once a period has passed
// since the last one. At most |max_boundaries| are kept: when full, every
// other one goes (the first stays) and the period doubles, so the series
// always spans the whole run at a resolution that halves as it lengthens.
// Nothing is done per event. A boundary walks the tracker's counters once
// (a flat array, by stack id) and updates the series of the stacks holding
// memory: O(stack ids) reads and O(stacks with in use != 0) writes, 8 bytes
// per kept boundary per such stack.
//
// A series is a run of boundaries at which its stack held memory: a stack
// back at zero at a boundary gave back whatever it grew and is dropped; if it
// holds memory again, a new series starts. A series that starts after the
// first boundary starts from zero (the stack held nothing at the boundary
// before), so its first interval's growth counts.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_FORENSICS_GROWTH_H_
#define GPUFLAME_PROFILER_FORENSICS_GROWTH_H_

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/allocation_tracker.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

// When a stack counts as growing. All of them must hold.
struct GrowthThresholds {
  // It grew (in use higher than at the boundary before) in at least this
  // share of the intervals since it started holding memory: a clear majority,
  // so that a stack that grows once, or rises and falls, is not a leak.
  double min_grown_share = 2.0 / 3.0;
  // And in at least this many intervals: two of three is not yet sustained.
  size_t min_intervals_grown = 3;
  // Its growth (last in use less first) is material: at least |min_bytes|,
  // or at least |min_process_share| of its process's in use in its level at
  // the last boundary (a small process's leak matters too).
  int64_t min_bytes = int64_t{1} << 20;
  double min_process_share = 0.05;
};

struct GrowthOptions {
  uint64_t period_ns = 250'000'000;  // the first period; doubles at each halving
  size_t max_boundaries = 64;
  GrowthThresholds thresholds;
};

// A stack that grew.
struct GrowingStack {
  StackId stack = 0;
  pid_t pid = 0;
  uint8_t domain = 0;
  int64_t growth_bytes = 0;  // last_inuse - first_inuse
  size_t intervals_grown = 0;
  size_t intervals = 0;       // since it started holding memory
  int64_t first_inuse = 0;    // at the boundary before its series (0), or at the first boundary
  int64_t last_inuse = 0;     // at the last boundary
  uint64_t since_ns = 0;      // CLOCK_MONOTONIC: the first boundary of its series
  int64_t process_inuse = 0;  // its process's in use in its level at the last boundary
};

class GrowthTracker {
 public:
  explicit GrowthTracker(GrowthOptions options = {});

  // From the event loop: takes a boundary if none was taken yet or a period
  // has passed since the last. Returns whether it took one.
  bool Tick(uint64_t now_ns, const std::vector<StackCounters>& counters, const StackTable& stacks);
  // A boundary now, whatever the period: the recording's end.
  void TakeBoundary(uint64_t now_ns, const std::vector<StackCounters>& counters, const StackTable& stacks);
  // Retired stack ids (StackTable::Retire): their series go, so that a
  // reused id starts afresh. A boundary also restarts the series of an id
  // whose process or level changed, should a caller not say.
  void ForgetStacks(std::span<const StackId> stacks);

  // The stacks that meet the thresholds, the largest growth first.
  std::vector<GrowingStack> Growing() const;

  size_t boundaries() const { return times_.size(); }
  size_t intervals() const { return times_.empty() ? 0 : times_.size() - 1; }
  uint64_t period_ns() const { return period_ns_; }
  // The boundaries kept (CLOCK_MONOTONIC), oldest first.
  const std::vector<uint64_t>& boundary_times() const { return times_; }
  const GrowthThresholds& thresholds() const { return options_.thresholds; }
  size_t MemoryUsage() const;

 private:
  struct Series {
    pid_t pid = 0;
    uint8_t domain = 0;
    size_t start = 0;             // the boundary index of values[0]
    std::vector<int64_t> values;  // in use at boundaries start, start + 1, ...
  };
  static uint64_t ProcessKey(pid_t pid, uint8_t domain) { return uint64_t{static_cast<uint32_t>(pid)} << 8 | domain; }
  // Keeps every other boundary (the first among them), doubling the period.
  void Halve();

  GrowthOptions options_;
  uint64_t period_ns_;
  std::vector<uint64_t> times_;
  absl::flat_hash_map<StackId, Series> series_;
  absl::flat_hash_map<uint64_t, int64_t> process_inuse_;  // at the last boundary, by (pid, domain)
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_FORENSICS_GROWTH_H_
