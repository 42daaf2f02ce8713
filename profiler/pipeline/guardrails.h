// gpuflame's own budget. A profiler that slows the workload or eats the
// node's memory gets switched off, so gpuflame watches its own CPU time and
// resident memory (from /proc/self) and, when over budget, sheds work in a
// fixed, documented order instead of growing or competing with the job:
//
//   CPU over budget:    1. native stacks off (no 16 KB stack copies, no DWARF
//                          unwinding: the largest per-event cost)
//                       2. CPU-time samples off
//                       3. tensor-level (caching-allocator) events through
//                          the probes sampled by bytes: an allocation under
//                          4 MiB is taken with probability size / 4 MiB and
//                          stands for 4 MiB (gpuflame_abi.h,
//                          GF_SHED_TENSOR_SAMPLED), so the memory profiles
//                          stay, as unbiased estimates, for a small share of
//                          the stack walks (the agent samples so by default
//                          already, past each process's start-up: this rung
//                          samples the start-ups too)
//                       4. tensor-level events off
//   memory over budget: 1. native stacks off (mixed stacks are most of the
//                          distinct stacks, and their unwind tables)
//                       2. no new stacks: events on stacks not seen before are
//                          charged to `[gpuflame over memory budget]`
//
// The CPU ladder also runs on gpuflame's cost inside the profiled processes:
// the time its BPF programs ran (the kernel's run-time stats), as a share of
// the CPU time those processes used, over the same window (max_overhead).
// That is time the workload lost: the share a user sees in step time. The
// lifecycle programs on kernel tracepoints run in every process of the node
// and are left out (ProgramRunStats::machine_wide): shedding a workload's
// profiles would not make them cheaper, and a busy node's syscalls would
// otherwise push an idle workload's share over budget.
//
// CPU is averaged over the last 10 s, so a burst (symbol tables loaded for
// a new library, a flood of new stacks to unwind) is not a trend; a CPU step
// is taken at most every 10 s. A step is taken back only after usage has
// stayed well under budget for 30 s (hysteresis), so gpuflame does not
// oscillate. Every change is kept with its time and reason: the summary, the
// metrics and the profiles themselves say what was shed and when.
//
// Not thread-safe: the pipeline's worker calls Check() about once a second.
#ifndef GPUFLAME_PROFILER_PIPELINE_GUARDRAILS_H_
#define GPUFLAME_PROFILER_PIPELINE_GUARDRAILS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/scoped_fd.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

// What is shed, as bits: the BPF side's `shed` flags (enum gf_shed), plus
// the stack freeze that only user space does.
enum ShedAction : uint32_t {
  kShedNativeStacks = GF_SHED_NATIVE_STACKS,
  kShedCpuSamples = GF_SHED_CPU_SAMPLES,
  kShedTensorEvents = GF_SHED_TENSOR_EVENTS,
  kFreezeStacks = 1u << 3,  // user space only: new stacks go to a marker
  kSampleTensorEvents = GF_SHED_TENSOR_SAMPLED,
};
inline constexpr uint32_t kShedInBpf = kShedNativeStacks | kShedCpuSamples | kShedTensorEvents | kSampleTensorEvents;
static_assert((kFreezeStacks & kShedInBpf) == 0, "the freeze is not a BPF bit");

// "native stacks, CPU samples" for the flags set; "nothing" for none.
std::string DescribeShed(uint32_t actions);

struct GuardrailLimits {
  double max_cpu_cores = 1.0;           // gpuflame's CPU seconds per second (0: no limit)
  // gpuflame's BPF time in the profiled processes per second of their CPU
  // time (0.01: 1%; 0: no limit). record's default is none: it is the exact mode.
  double max_overhead = 0;
  uint64_t max_rss_bytes = 768ull << 20;  // resident memory (0: no limit); the chart's limit is 1 GiB
  bool enabled() const { return max_cpu_cores > 0 || max_rss_bytes > 0 || max_overhead > 0; }
};

class Guardrails {
 public:
  struct Usage {
    double cpu_cores = 0;   // averaged over the last kCpuWindowNs (0 until 1 s of data)
    uint64_t rss_bytes = 0;
    // gpuflame's BPF time / the profiled processes' CPU time, over the same
    // window; -1 until known (no stats, or no CPU time used yet).
    double overhead = -1;
  };
  struct Change {
    int64_t at_ns = 0;     // CLOCK_MONOTONIC
    uint32_t actions = 0;  // in force from then on
    std::string reason;    // "CPU 0.71 cores > 0.50", "RSS 1.2 GiB > 1.0 GiB", "back under budget"
  };

  explicit Guardrails(GuardrailLimits limits);
  // For testing: read usage from these files instead of /proc/self.
  Guardrails(GuardrailLimits limits, base::ScopedFd stat, base::ScopedFd statm);

  // Reads /proc/self and decides; returns the actions in force.
  // |bpf_ns| and |workload_cpu_ns| are running totals (the BPF programs' run
  // time, the profiled processes' CPU time), or 0 when unknown.
  uint32_t Check(int64_t now_ns, uint64_t bpf_ns = 0, uint64_t workload_cpu_ns = 0);
  // The decision alone, from a measured |usage| (Check() calls it).
  uint32_t Decide(int64_t now_ns, Usage usage);

  uint32_t actions() const { return actions_; }
  const Usage& last_usage() const { return last_; }
  const std::vector<Change>& changes() const { return changes_; }
  const GuardrailLimits& limits() const { return limits_; }
  // gpuflame's own CPU time so far, user and system, every thread: seconds,
  // or -1 if /proc/self/stat cannot be read. Read now (one pread), whether or
  // not a budget is set. Not the time its BPF programs run in the profiled
  // processes: the kernel charges that to them (profiler/probes/program_stats.h).
  double CpuSeconds() const;
  // One line per change for the user, times relative to |start_ns|
  // (CLOCK_MONOTONIC): "at +12.0 s (CPU 1.31 cores > 1.00) gpuflame shed
  // native stacks". Goes into warnings and into every profile's comments.
  std::vector<std::string> Describe(int64_t start_ns) const;

  static constexpr int64_t kCpuWindowNs = 10'000'000'000;
  // At most one CPU step per this long.
  static constexpr int64_t kCpuStepNs = 10'000'000'000;
  // Time under budget before one step is taken back.
  static constexpr int64_t kRecoverNs = 30'000'000'000;
  // Usage must be under this share of the budget to count as recovered.
  static constexpr double kRecoverShare = 0.7;

 private:
  bool ReadCpuTicks(uint64_t& ticks) const;
  bool ReadUsage(int64_t now_ns, uint64_t bpf_ns, uint64_t workload_cpu_ns, Usage& out);
  void Step(int64_t now_ns, int& level, int delta, std::string reason);
  uint32_t ActionsFor() const;

  GuardrailLimits limits_;
  base::ScopedFd stat_;
  base::ScopedFd statm_;
  long ticks_per_s_;
  long page_bytes_;
  struct Read {
    int64_t at_ns;
    uint64_t ticks;  // gpuflame's CPU
    uint64_t bpf_ns;
    uint64_t workload_cpu_ns;
  };
  std::vector<Read> reads_;  // the last kCpuWindowNs
  int64_t last_cpu_step_ns_ = -1;
  Usage last_;
  int cpu_level_ = 0;  // steps taken on the CPU ladder
  int mem_level_ = 0;  // steps taken on the memory ladder
  int64_t cpu_under_since_ = -1;
  int64_t mem_under_since_ = -1;
  uint32_t actions_ = 0;
  std::vector<Change> changes_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_GUARDRAILS_H_
