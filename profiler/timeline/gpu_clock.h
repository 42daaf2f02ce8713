// CUPTI's timestamps on the BPF clock (CLOCK_MONOTONIC), per process.
//
// CUPTI stamps activity with its own clock: CLOCK_REALTIME by default on
// Linux x86-64 (cupti_activity.h, CUDA 13.0), GPU-side records linearly
// interpolated into it by CUPTI. Our probes and the in-process events use
// CLOCK_MONOTONIC. The injection library pairs the two at each flush period
// (gpuflame:status's clock arguments): it reads CLOCK_MONOTONIC, then
// cuptiGetTimestamp(), then CLOCK_MONOTONIC again. Each pair is a snapshot;
// a CUPTI time converts through the snapshots around it, linearly between
// them (CLOCK_REALTIME may be slewed by NTP, or stepped, between two).
//
// What alignment this gives, measured from the snapshots themselves: each
// is uncertain by half the time between its two monotonic reads, and the
// offset between the clocks moved by at most max_step_ns from one snapshot
// to the next (interpolation takes a steady slew out; a step is placed
// somewhere between the two). CUPTI's own GPU-to-CPU interpolation error is
// not measurable here and not in these figures.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_TIMELINE_GPU_CLOCK_H_
#define GPUFLAME_PROFILER_TIMELINE_GPU_CLOCK_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuflame::profiler::timeline {

struct ClockAlignment {
  uint64_t snapshots = 0;
  uint64_t max_uncertainty_ns = 0;  // half the widest bracket of monotonic reads
  uint64_t max_step_ns = 0;         // largest change of the offset between consecutive snapshots
  uint64_t rejected = 0;            // snapshots out of order or with an implausible bracket
};

class GpuClock {
 public:
  // At most this many snapshots per process (one a second: over 4 hours);
  // later ones are counted as rejected.
  static constexpr size_t kMaxSnapshots = 1 << 14;
  // A bracket wider than this (the reading thread was descheduled between
  // its reads) says too little: rejected.
  static constexpr uint64_t kMaxBracketNs = 1'000'000;

  void OnSnapshot(pid_t pid, uint64_t cupti_ns, uint64_t mono_before_ns, uint64_t mono_after_ns);
  // |cupti_ns| of |pid| on CLOCK_MONOTONIC; nullopt without any snapshot of it.
  std::optional<uint64_t> ToMonotonic(pid_t pid, uint64_t cupti_ns) const;
  // The inverse: |mono_ns| (a probe's time) of |pid| on CUPTI's clock,
  // through the same snapshots; nullopt without any snapshot of it.
  std::optional<uint64_t> ToCupti(pid_t pid, uint64_t mono_ns) const;
  ClockAlignment Alignment(pid_t pid) const;
  // |pid| was retired: a new process may take its number.
  void Forget(pid_t pid) { processes_.erase(pid); }
  // At kMaxSnapshots, drop the older half instead of rejecting new ones:
  // for the flight recorder, which converts only its last seconds' records.
  void KeepRecentOnly() { keep_recent_ = true; }

 private:
  struct Snapshot {
    uint64_t cupti_ns;
    int64_t offset_ns;  // cupti - monotonic (the bracket's middle)
  };
  struct Process {
    std::vector<Snapshot> snapshots;  // ascending cupti_ns
    ClockAlignment alignment;
  };
  // The offset (cupti - monotonic) at |t|, a time on the clock |on| reads a
  // snapshot's time from: the nearest snapshot's outside them, moving
  // linearly from one to the next between them. Empty |s|: none.
  template <typename On>
  static std::optional<int64_t> OffsetAt(const std::vector<Snapshot>& s, uint64_t t, On on);
  absl::flat_hash_map<pid_t, Process> processes_;
  bool keep_recent_ = false;
};

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_GPU_CLOCK_H_
