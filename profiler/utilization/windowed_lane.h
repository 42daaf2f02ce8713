// One GPU as one process sees it, judged only where CUPTI looked: the
// agent's duty-cycled activity (cupti/duty_cycle.h) is on for a second in
// ten, and while it is off there are no records, so "no records" cannot be
// told from "GPU idle". The library says when activity was on
// (GF_GPU_ACTIVITY_WINDOW: on-spans, on CUPTI's clock); busy and idle are
// judged inside them only, and the share of the stretch judged that was
// observed is said with the figures (coverage), never scaled up.
//
// Inside an on-span:
//  - its lead, from the span's start to its first work, is not judged: work
//    launched before the span (a launch-ahead queue, PyTorch's is deep) may
//    run there without a record, so that stretch may be busy or idle. Busy
//    is therefore judged from the first work on (a span with no work at all
//    is not judged: coverage says so). Where a recorded run carries over
//    from before the span, the span is judged from its start;
//  - busy is the union of kernels, copies and memsets (as BusyLane); the
//    holes between are gaps, idle gaps from LaneOptions::gap_ns; the hole
//    from the last work to the span's end is a gap too (activity was on, and
//    work launched in it would have a record);
//  - a gap never crosses a span's end: the holes of two spans are judged
//    apart, the off period between is neither busy nor idle.
// Work launched inside a span may run after it closed (a launch-ahead
// queue): it has a record, its kernel count and duration are counted
// (they are facts of the kernel), and its time after the span's end is
// neither busy nor idle (counts().outside_records); a carried-over run
// that reaches into the next span is busy there.
//
// Records come in CUPTI's buffer order and on-spans when they close: each
// judgement takes the stretch up to reorder_ns behind the newest time seen
// (everything: all of it), carries a run or a gap still open at its end
// into the next, and counts a record that comes after its time was judged
// (late_records: its kernel figures counted, its time not).
// Bounded: at most max_pending records wait (more are counted, dropped)
// and max_gaps idle gaps are kept per judgement for the CPU join.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_UTILIZATION_WINDOWED_LANE_H_
#define GPUFLAME_PROFILER_UTILIZATION_WINDOWED_LANE_H_

#include <cstdint>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "profiler/utilization/busy_lane.h"

namespace gpuflame::profiler::utilization {

// What one judgement found (one agent window, usually). |figures| is in
// PartStats' terms for report.h's Judge: its span (end_ns - start_ns) is the
// observed time, busy_ns and gap_ns lie inside it.
struct LaneJudgement {
  uint64_t from_ns = 0;  // the stretch judged, CUPTI's clock
  uint64_t to_ns = 0;
  uint64_t observed_ns = 0;    // inside on-spans, from each span's first work
  uint64_t unjudged_ns = 0;    // inside on-spans, before their first work (or spans without work)
  PartStats figures;           // start_ns = 0, end_ns = observed_ns
  std::vector<Gap> idle_gaps;  // the idle gaps closed in it (CUPTI's clock), at most max_gaps
  uint64_t gaps_not_kept = 0;
  uint64_t sync_ns = 0;  // GF_GPU_SYNC waits that began in it (Utilization fills it)
  uint64_t wall_ns() const { return to_ns > from_ns ? to_ns - from_ns : 0; }
  double coverage() const;  // observed / wall
};

struct WindowedCounts {
  uint64_t records = 0;
  uint64_t late_records = 0;     // came after their stretch was judged: in kernel figures, not in busy or gaps
  uint64_t outside_records = 0;  // started outside every on-span (launched inside one, ran after it closed)
  uint64_t dropped = 0;          // past max_pending waiting: counted, not judged
};

class WindowedLane {
 public:
  explicit WindowedLane(const LaneOptions& options) : o_(options) {}

  // GPU work only (GF_GPU_IS_WORK).
  void Add(const gf_kernel_record& r);
  // Judges what is settled: up to reorder_ns behind |newest_ns| (the newest
  // time the process's records and spans reached), or everything.
  // |spans|: the process's on-spans, disjoint and in order.
  LaneJudgement Judge(const std::vector<Gap>& spans, uint64_t newest_ns, bool everything);

  const WindowedCounts& counts() const { return counts_; }
  uint64_t judged_to() const { return judged_to_; }
  size_t pending() const { return pending_.size(); }

 private:
  struct Work {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t bytes;
    uint8_t kind;
    uint8_t copy_kind;
  };
  void Count(const Work& w, PartStats& f) const;

  LaneOptions o_;
  std::vector<Work> pending_;
  uint64_t judged_to_ = 0;  // 0: nothing judged yet
  // Carried from the last judgement:
  uint64_t busy_end_ = 0;        // a run still going at judged_to_ ends here (> judged_to_)
  bool span_observed_ = false;   // the span going on at judged_to_ had its first work
  uint64_t open_gap_start_ = 0;  // ... and was in a hole since then (0: none)
  WindowedCounts counts_;
};

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_WINDOWED_LANE_H_
