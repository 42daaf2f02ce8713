// One GPU as one process sees it (a CUDA device ordinal of that process):
// when it was busy and when it idled, from CUPTI's activity records.
//
// Busy is the union of the device's work on all its streams: kernels,
// copies and memsets, overlapping ones counted once. The time between two
// stretches of work is a gap; a gap of at least LaneOptions::gap_ns (5 ms,
// the seeds' default: shorter ones are launch overhead, not starvation) is
// an idle gap; one of at least pause_ns (1 s) is a pause, which cuts the
// lane's run into parts (the start-up rule of report.h judges from them).
//
// Records come per process in CUPTI's buffer order, not time order: each is
// held in a heap until no record can start before it (reorder_ns behind the
// newest start seen; the library flushes every second), then applied in
// start order. One that comes later still, starting before the stretch of
// work being merged, is counted (late_records) and left out of busy and
// gaps, never merged wrongly.
//
// Bounded: windows (coarsened two into one when full), parts, kept gaps
// and the heap are capped, each overflow counted.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_UTILIZATION_BUSY_LANE_H_
#define GPUFLAME_PROFILER_UTILIZATION_BUSY_LANE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "profiler/utilization/duration_histogram.h"

namespace gpuflame::profiler::utilization {

struct LaneOptions {
  uint64_t window_ns = 100'000'000;     // --interval
  uint64_t gap_ns = 5'000'000;          // --idle-gap-ms
  uint64_t pause_ns = 1'000'000'000;    // a gap that cuts the run into parts
  uint64_t reorder_ns = 3'000'000'000;  // how late a record may come and still be merged
  uint64_t short_kernel_ns = 10'000;    // "tiny" kernels: launch overhead dominates them
  size_t max_windows = 1 << 15;
  size_t max_gaps = 1 << 17;  // idle gaps kept for the CPU-sample join
  size_t max_parts = 64;
  size_t max_pending = 1 << 20;
};

// Copies by direction (CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD;
// the rest, peer-to-peer and arrays, as "other").
enum CopyDirection : uint8_t { kHtoD = 0, kDtoH, kDtoD, kOtherCopy, kCopyDirections };
CopyDirection DirectionOf(uint8_t cupti_copy_kind);
const char* DirectionName(CopyDirection d);

struct CopyStats {
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t ns = 0;  // the copies' own durations summed (bandwidth = bytes / ns)
};

// A stretch of the lane's run between pauses, or the whole run (Merge).
struct PartStats {
  uint64_t start_ns = 0;  // its first work's start (CUPTI's clock)
  uint64_t end_ns = 0;    // its last work's end
  uint64_t busy_ns = 0;
  uint64_t gap_ns = 0;  // idle gaps (>= gap_ns) inside it
  uint64_t gaps = 0;
  uint64_t short_gap_ns = 0;  // gaps under the threshold
  uint64_t kernels = 0;
  uint64_t short_kernels = 0;
  uint64_t kernel_ns = 0;
  DurationHistogram kernel_durations;
  std::array<CopyStats, kCopyDirections> copies{};
  uint64_t memsets = 0;
  uint64_t memset_bytes = 0;

  uint64_t span_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
  // Adds |o|'s counts; the span runs from the earlier start to the later end.
  void Merge(const PartStats& o);
};

struct Gap {
  uint64_t start_ns = 0;  // CUPTI's clock
  uint64_t end_ns = 0;
};

struct Window {
  uint64_t busy_ns = 0;
  uint64_t gap_ns = 0;  // in idle gaps and pauses
  uint32_t kernels = 0;
};

struct LaneCounts {
  uint64_t records = 0;
  uint64_t late_records = 0;  // came after their place was merged: out of busy and gaps
  uint64_t late_ns = 0;
  uint64_t weighted_records = 0;     // duty-cycled activity: busy and gaps cannot be judged
  uint64_t gaps_not_kept = 0;        // idle gaps past max_gaps (counted in the figures, not joined)
  uint64_t pauses_in_last_part = 0;  // pauses past max_parts, counted as idle gaps
  uint64_t forced = 0;               // applied early: the heap was full
  uint64_t implausible = 0;          // end before start: taken as zero-length
};

class BusyLane {
 public:
  explicit BusyLane(const LaneOptions& options) : o_(options), window_ns_(options.window_ns) {}

  void Add(const gf_kernel_record& r);
  // Applies the records no later one can precede; |everything|: all of them
  // (the recording has ended).
  void Settle(bool everything);

  // In time order; the last is open until Settle(true).
  const std::vector<PartStats>& parts() const { return parts_; }
  const std::vector<Gap>& pauses() const { return pauses_; }
  const std::vector<Gap>& gaps() const { return gaps_; }  // idle gaps and pauses, in order
  const std::vector<Window>& windows() const { return windows_; }
  uint64_t window_ns() const { return window_ns_; }
  uint64_t origin_ns() const { return origin_ns_; }
  const LaneCounts& counts() const { return counts_; }
  const LaneOptions& options() const { return o_; }
  // The whole run, every part and pause.
  PartStats Whole() const;

 private:
  struct Pending {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t bytes;
    uint8_t kind;
    uint8_t copy_kind;
    bool operator>(const Pending& o) const { return start_ns > o.start_ns; }
  };
  void Apply(const Pending& p);
  void CloseRun();
  void OnGap(uint64_t start, uint64_t end);
  void AddToWindows(uint64_t start, uint64_t end, uint64_t Window::*field);
  size_t WindowIndex(uint64_t t);

  LaneOptions o_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  uint64_t newest_start_ = 0;
  bool running_ = false;  // a stretch of work is being merged
  uint64_t run_start_ = 0;
  uint64_t run_end_ = 0;
  std::vector<PartStats> parts_;
  std::vector<Gap> pauses_;
  std::vector<Gap> gaps_;
  std::vector<Window> windows_;
  uint64_t window_ns_;
  uint64_t origin_ns_ = 0;
  LaneCounts counts_;
};

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_BUSY_LANE_H_
