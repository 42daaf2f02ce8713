// Why the GPU idles: each process's GPUs, busy and idle over time (one
// BusyLane per process and CUDA device ordinal), the time its threads waited
// in synchronise calls, and what its threads were doing on the CPU while a
// GPU idled (the idle-time flame graph, idle_profile.h).
//
// Fed by the event loop with what it decodes already: CUPTI's activity
// batches (GPU work and GF_GPU_SYNC waits), the probes' synchronise calls
// (GF_EV_CUDA_SYNC, with their stacks), the CPU samples, the library's
// clock pairs. CPU samples are kept (16 bytes each, bounded) until Finish
// joins them with the idle gaps, which are on CUPTI's clock and final only
// once the lanes have settled.
//
// A lane is a GPU as one process sees it: CUDA's ordinal in that process.
// Two processes' ordinal 0 may be two GPUs (CUDA_VISIBLE_DEVICES), so lanes
// are never summed across processes here.
// Not thread-safe: event loop only (EventProcessor calls it), then the
// caller of Finish.
#ifndef GPUFLAME_PROFILER_UTILIZATION_UTILIZATION_H_
#define GPUFLAME_PROFILER_UTILIZATION_UTILIZATION_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/resolve/stack_table.h"
#include "profiler/timeline/gpu_clock.h"
#include "profiler/utilization/busy_lane.h"
#include "profiler/utilization/lane_uuids.h"
#include "profiler/utilization/windowed_lane.h"

namespace gpuflame::profiler::utilization {

struct UtilizationOptions {
  LaneOptions lane;
  size_t max_lanes = 256;
  size_t max_samples = 1 << 21;      // CPU samples kept for the join (32 MiB)
  size_t max_syncs = 1 << 18;        // synchronise waits kept per process for the join
  size_t max_sync_stacks = 1 << 16;  // (process, stack) pairs whose wait is summed
  // The agent: CUPTI activity is duty-cycled, so lanes are WindowedLanes,
  // judged only inside the library's on-spans (GF_GPU_ACTIVITY_WINDOW), a
  // judgement per JudgeWindows call. Off (record: activity always on, the
  // spans are ignored): BusyLanes, judged at Finish, as ever.
  bool windowed = false;
  size_t max_spans = 4096;  // on-spans kept per process (the oldest judged ones go first)
};

// One lane's judgement in windowed mode.
struct JudgedLane {
  pid_t pid = 0;
  uint32_t device = 0;  // the process's CUDA ordinal
  std::string uuid;     // its GPU's, as the process's library said (lane_uuids.h); empty: not said
  LaneJudgement judgement;
  // The judged stretch on CLOCK_MONOTONIC (the NVML sampler's clock), through
  // the process's clock pairs, for the driver's figures over it; nullopt
  // without a pair. Here, since an ended process's pairs go with its lanes.
  std::optional<uint64_t> from_mono_ns, to_mono_ns;
  WindowedCounts counts;
  bool ended = false;  // its process ended: the last judgement, the lane is gone
};

struct SyncStats {
  uint64_t calls = 0;
  uint64_t ns = 0;
  uint64_t stream_ns = 0;   // cudaStreamSynchronize
  uint64_t context_ns = 0;  // cudaDeviceSynchronize, cuCtxSynchronize
  uint64_t event_ns = 0;    // cudaEventSynchronize
  uint64_t not_kept = 0;    // past max_syncs: in the sums, not in the gap join
  // From the probes: waits of a process without any clock pair when
  // recording ended (CUPTI's clock unknown): in the sums, not in the join.
  uint64_t not_aligned = 0;
  // The waits came from the probes (GF_EV_CUDA_SYNC); false: CUPTI's records.
  bool from_probes = false;
  // CUPTI's GF_GPU_SYNC records of a process the probes also reported:
  // the same waits, not counted again.
  uint64_t cupti_ignored = 0;
};

// Where a GPU's idle time went: a CPU stack of the lane's process, or
// kNone for a gap in which no thread of it was sampled on the CPU.
struct IdleCharge {
  pid_t pid = 0;
  uint32_t device = 0;
  StackId stack = StackTable::kNone;
  bool start_up = false;  // the gap lies before the lane's steady state (report.h)
  bool operator==(const IdleCharge&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const IdleCharge& c) {
    return H::combine(std::move(h), c.pid, c.device, c.stack, c.start_up);
  }
};

struct IdleJoin {
  absl::flat_hash_map<IdleCharge, uint64_t> ns;  // idle time by where it went
  uint64_t gaps = 0;
  uint64_t gaps_without_sample = 0;
  uint64_t gaps_unaligned = 0;  // no clock pair of the process: not joined
  uint64_t unaligned_ns = 0;
  uint64_t samples_dropped = 0;  // past max_samples: not joined
  // Per lane: idle time of its steady state during which a thread of the
  // process was in a synchronise call.
  std::map<std::pair<pid_t, uint32_t>, uint64_t> sync_in_gaps_ns;
};

class Utilization {
 public:
  explicit Utilization(UtilizationOptions options) : o_(std::move(options)) {}

  void OnGpuRecords(pid_t pid, std::span<const gf_kernel_record> records);
  void OnCpuSample(pid_t pid, uint64_t ts_ns, StackId stack);
  // A synchronise call from the probes: |api| one of GF_API_IS_CUDA_SYNC,
  // entered and returned at |start_ns|..|end_ns| on CLOCK_MONOTONIC,
  // called from |stack|. Converted to CUPTI's clock in Finish, when every
  // clock pair of the process has arrived.
  void OnSyncCall(pid_t pid, uint16_t api, uint64_t start_ns, uint64_t end_ns, StackId stack);
  void OnClock(pid_t pid, uint64_t cupti_ns, uint64_t mono_before_ns, uint64_t mono_after_ns) {
    clock_.OnSnapshot(pid, cupti_ns, mono_before_ns, mono_after_ns);
  }
  // The recording ended: every record applied.
  void Finish();
  // Windowed mode: judges each lane up to what is settled (windowed_lane.h);
  // the lanes of processes for which |ended| says true judged to their end
  // and forgotten, with their spans and samples. Each idle gap judged is
  // joined with its process's CPU samples into |join| (as JoinIdle, no
  // start-up: the agent's windows are steady by construction, a process's
  // first 5 s aside, which CUPTI sees whole). Samples no judgement can use
  // any more are dropped.
  std::vector<JudgedLane> JudgeWindows(const std::function<bool(pid_t)>& ended, IdleJoin& join);
  size_t windowed_lanes() const { return windowed_.size(); }
  // After Finish: each gap's time shared among the CPU samples of its
  // process taken during it (evenly: the flame graph's total is the idle
  // time itself), gaps before |steady_start| (CUPTI's clock, per lane)
  // marked as start-up.
  IdleJoin JoinIdle(const std::map<std::pair<pid_t, uint32_t>, uint64_t>& steady_start) const;

  const std::map<std::pair<pid_t, uint32_t>, BusyLane>& lanes() const { return lanes_; }
  // After Finish: each process's waits, from the probes where they
  // reported any (then CUPTI's records of it are ignored), else CUPTI's.
  const absl::flat_hash_map<pid_t, SyncStats>& syncs() const { return syncs_; }
  // Wait time by the stack that called the synchronise call (probes only).
  const absl::flat_hash_map<std::pair<pid_t, StackId>, uint64_t>& sync_stacks() const { return sync_stacks_; }
  uint64_t sync_stacks_dropped() const { return sync_stacks_dropped_; }
  uint64_t lanes_dropped() const { return lanes_dropped_; }
  uint64_t samples() const { return samples_.size(); }
  const UtilizationOptions& options() const { return o_; }
  const timeline::GpuClock& clock() const { return clock_; }
  // Which GPU each lane is, where the process's library said (GF_GPU_DEVICE).
  const LaneUuids& uuids() const { return uuids_; }

 private:
  struct CpuSample {
    uint64_t ts_ns;
    pid_t pid;
    StackId stack;
  };
  UtilizationOptions o_;
  std::map<std::pair<pid_t, uint32_t>, BusyLane> lanes_;  // (pid, device), ordered for stable output
  uint64_t lanes_dropped_ = 0;                            // records of lanes past max_lanes
  void ResolveSyncs();
  absl::flat_hash_map<pid_t, SyncStats> syncs_;               // final: Finish
  absl::flat_hash_map<pid_t, SyncStats> cupti_syncs_;         // from GF_GPU_SYNC records
  absl::flat_hash_map<pid_t, std::vector<Gap>> sync_spans_;   // CUPTI's clock
  absl::flat_hash_map<pid_t, SyncStats> probe_syncs_;         // from GF_EV_CUDA_SYNC
  absl::flat_hash_map<pid_t, std::vector<Gap>> probe_spans_;  // CLOCK_MONOTONIC until Finish
  absl::flat_hash_map<std::pair<pid_t, StackId>, uint64_t> sync_stacks_;
  uint64_t sync_stacks_dropped_ = 0;  // waits past max_sync_stacks: in the sums, not by stack
  std::vector<CpuSample> samples_;
  uint64_t samples_dropped_ = 0;
  // Windowed mode:
  struct ProcessSpans {
    std::vector<Gap> spans;  // disjoint, in order (CUPTI's clock)
    uint64_t newest_ns = 0;  // the newest time its records and spans reached
    uint64_t sync_ns = 0;    // GF_GPU_SYNC waits since the last judgement
    uint64_t spans_dropped = 0;
  };
  void AddSpan(ProcessSpans& p, uint64_t start, uint64_t end);
  void JoinGaps(pid_t pid, uint32_t device, const std::vector<Gap>& gaps, IdleJoin& join) const;
  // One gap's time to the CPU samples of [first, last) taken in it, or to
  // no stack; counted in |join|.
  using SampleIt = std::vector<CpuSample>::const_iterator;
  void JoinGap(pid_t pid, uint32_t device, const Gap& g, bool start_up, SampleIt first, SampleIt last,
               IdleJoin& join) const;
  std::map<std::pair<pid_t, uint32_t>, WindowedLane> windowed_;
  absl::flat_hash_map<pid_t, ProcessSpans> spans_;
  timeline::GpuClock clock_;
  LaneUuids uuids_;
};

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_UTILIZATION_H_
