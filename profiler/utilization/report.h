// The numbers a user reads to answer "why is the GPU idle", per lane (a
// process's GPU), and the three-step verdict built on them (the seeds'
// GPU-utilisation method):
//  1. idle gaps (>= the gap threshold) take 30% of the time or more: the GPU
//     waits for its supply (data loading, host work, a synchronisation):
//     `supply`; look at what the CPU did in the gaps (gpu_idle);
//  2. otherwise, the GPU idles between kernels in gaps under the threshold
//     (busy under 70%) or most kernels are tiny (under 10 µs): launch
//     overhead rules, `launch_bound` (fuse: torch.compile, CUDA graphs); or
//     kernels' P95 is over ten times their P50: a few slow kernels,
//     `slow_kernels`;
//  3. the GPU is busy: DRAM bandwidth at 60% of its peak or more over the
//     steady state (NVML's GPM metrics, Hopper and newer) says the kernels
//     wait on memory, `memory_bound` (fuse to cut round trips, lower the
//     precision); without GPM figures step 3 is said not judged, with why,
//     never guessed.
// What is left is `busy`: the GPU worked most of the time, not on memory.
//
// The start-up rule: a run whose parts (busy_lane.h: stretches between
// pauses of a second or more) begin with little work (loading a model,
// compiling) is judged from its first part busy at least half as long as
// its busiest part, to its end; what comes before is start-up, reported on
// its own. Pauses after that (a checkpoint, a stall each epoch) still count.
#ifndef GPUFLAME_PROFILER_UTILIZATION_REPORT_H_
#define GPUFLAME_PROFILER_UTILIZATION_REPORT_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/utilization/busy_lane.h"
#include "profiler/utilization/device_figures.h"
#include "profiler/utilization/utilization.h"

namespace gpuflame::profiler::utilization {

enum class Verdict { kNotJudged, kSupply, kLaunchBound, kSlowKernels, kMemoryBound, kBusy };
const char* VerdictName(Verdict v);  // "supply", ...

inline constexpr double kSupplyGapRatio = 0.30;
inline constexpr double kLaunchBoundBusy = 0.70;
inline constexpr double kTinyKernelShare = 0.50;
inline constexpr double kSlowTailRatio = 10.0;
inline constexpr double kMemoryBoundDram = 60.0;       // % of peak DRAM bandwidth (GPM)
inline constexpr uint64_t kMinJudgedNs = 200'000'000;  // less GPU run than this: too little to judge

struct LaneReport {
  pid_t pid = 0;
  uint32_t device = 0;
  PartStats whole;           // the whole run
  PartStats steady;          // what the verdict judges (whole, without the start-up)
  uint64_t start_up_ns = 0;  // 0: no start-up set apart
  uint64_t start_up_busy_ns = 0;
  size_t start_up_pauses = 0;
  uint64_t steady_start_ns = 0;  // CUPTI's clock
  size_t pauses = 0;
  LaneCounts counts;
  uint64_t gap_threshold_ns = 0;
  uint64_t sync_in_gaps_ns = 0;  // idle time of the steady state while a thread waited in a synchronise call
  Verdict verdict = Verdict::kNotJudged;
  std::string reason;  // one sentence with the numbers behind the verdict
};

double Ratio(uint64_t part, uint64_t whole);

// The start-up rule for one lane (after Utilization::Finish): its figures,
// whole and steady; no verdict yet.
LaneReport SteadyState(pid_t pid, uint32_t device, const BusyLane& lane);
// The verdict, given the steady state's idle time spent in synchronise
// calls (IdleJoin::sync_in_gaps_ns) and what NVML said of the lane's GPU
// over the steady state (null where the lane's GPU is not known, |no_gpu|
// says why).
void Judge(LaneReport& r, uint64_t sync_in_gaps_ns, const DeviceStats* gpu = nullptr,
           const std::string& no_gpu = "NVML was not read");

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_REPORT_H_
