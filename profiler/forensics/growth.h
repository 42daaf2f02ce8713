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
// back at zero at a boundary gave back whatever it grew and its series ends
// there; if it holds memory again, a new series starts. A series that starts
// after the first boundary starts from zero (the stack held nothing at the
// boundary before), so its first interval's growth counts.
//
// A process that ended is judged as it stood before its teardown. Whatever a
// process frees after its last allocation (at that level) is teardown: a
// script that empties its caches before it exits, a server's shutdown
// freeing its pools. Judged at its last boundary, a leak it frees so would
// look given back. So each process also keeps, per boundary, how many
// allocations it had made and its in use; an ended process is judged at its
// end boundary: of the boundaries from the one before the interval of its
// last allocation on (after which it only freed), the one where its in use
// was highest, the latest of equals (the last boundary when it freed
// nothing). A process still running when the recording ends has no
// teardown: it is judged at the last boundary, whatever it freed last. An
// ended series is kept until its process allocates again (it cannot then
// be at an end boundary), so memory stays bounded by the stacks holding
// memory and those that gave it back in a process's final, free-only stretch.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_FORENSICS_GROWTH_H_
#define GPUFLAME_PROFILER_FORENSICS_GROWTH_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
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
  size_t intervals = 0;       // since it started holding memory, up to its process's end boundary
  int64_t first_inuse = 0;    // at the boundary before its series (0), or at the first boundary
  int64_t last_inuse = 0;     // at its process's end boundary (the last boundary, or the one before its teardown)
  uint64_t since_ns = 0;      // CLOCK_MONOTONIC: the first boundary of its series
  uint64_t until_ns = 0;      // CLOCK_MONOTONIC: its process's end boundary
  int64_t process_inuse = 0;  // its process's in use in its level at its end boundary
  // Its process ended and was judged before its teardown (the end boundary
  // is not the last one); what the stack held at the last boundary.
  bool before_teardown = false;
  int64_t final_inuse = 0;
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

  // The stacks that meet the thresholds, the largest growth first. |ended|
  // says which processes ended before the last boundary (they are judged
  // before their teardown); none when not given.
  std::vector<GrowingStack> Growing(const std::function<bool(pid_t)>& ended = nullptr) const;

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
    bool ended = false;           // the stack held nothing at boundary start + values.size()
  };
  // A process at one level, from the first boundary at which it had made an
  // allocation or held memory.
  struct ProcessSeries {
    size_t start = 0;
    std::vector<int64_t> allocations;  // allocations made so far (summed counters), per boundary
    std::vector<int64_t> inuse;        // in use, per boundary
  };
  static uint64_t ProcessKey(pid_t pid, uint8_t domain) { return uint64_t{static_cast<uint32_t>(pid)} << 8 | domain; }
  // Keeps every other boundary (the first among them), doubling the period.
  void Halve();
  // The boundary |p| is judged at (see the header comment).
  size_t EndBoundary(const ProcessSeries& p, bool ended) const;

  GrowthOptions options_;
  uint64_t period_ns_;
  std::vector<uint64_t> times_;
  absl::flat_hash_map<StackId, Series> series_;
  absl::flat_hash_map<uint64_t, ProcessSeries> processes_;  // by (pid, domain)
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_FORENSICS_GROWTH_H_
