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
//   overhead over budget (gpuflame's time inside the profiled processes):
//                       1. native stacks off (their copies are most of the
//                          BPF programs' time)
//                       2. thrift 1: libgpuflame_cupti.so's tensor hook
//                          samples even where exact was asked (`record`; a
//                          process's start-up stays exact) and takes a
//                          quarter of the allocations it took (interval x4,
//                          inprocess/thrift.h), and its duty-cycled CUPTI
//                          activity comes on half as often (records weighted
//                          twice); the probes' tensor events sampled by
//                          bytes, as on the CPU ladder
//                       3. thrift 2: interval x16, activity a quarter
//                       4. thrift 3: interval x64, activity an eighth
// That share is the time gpuflame's BPF programs ran in those processes (the
// kernel's run-time stats) plus what the injection library says its hook,
// callbacks and threads took there, over the CPU time the processes used in
// the same window (max_overhead): time the workload lost, the share a user
// sees in step time. Its ladder takes only what cuts that time and keeps
// every profile type: CPU samples cost a workload a few microseconds a
// second, and dropping tensor events in BPF would leave the library's hook
// paying for events nobody reads. Past its last rung what remains is the
// per-event floor (the library's allocator hook and CUPTI callbacks, the
// probes' trap): the metrics and summary show the share, and nothing more
// goes. The lifecycle programs on kernel tracepoints run in every process
// of the node and are left out (ProgramRunStats::machine_wide): shedding a
// workload's profiles would not make them cheaper, and a busy node's
// syscalls would otherwise push an idle workload's share over budget.
//
// CPU and overhead are averaged over the last 10 s, so a burst (symbol
// tables loaded for a new library, a flood of new stacks to unwind) is not a
// trend; each of their ladders takes a step at most every 10 s. A step is taken back only after usage has
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
  // The injection library's thrift level (inprocess/thrift.h), one bit a
  // level: user space holds that many of the library's thrift sites.
  kThrift1 = 1u << 5,
  kThrift2 = 1u << 6,
  kThrift3 = 1u << 7,
};
inline constexpr uint32_t kShedInBpf = kShedNativeStacks | kShedCpuSamples | kShedTensorEvents | kSampleTensorEvents;
inline constexpr uint32_t kThriftBits = kThrift1 | kThrift2 | kThrift3;
static_assert((kFreezeStacks & kShedInBpf) == 0, "the freeze is not a BPF bit");
static_assert((kThriftBits & (kShedInBpf | kFreezeStacks)) == 0, "thrift is not a BPF bit");
static_assert(GF_THRIFT_SITES == 3, "one bit per thrift level");

// The thrift level the |actions| ask of the injection library: 0-3.
inline uint32_t ThriftLevel(uint32_t actions) {
  return static_cast<uint32_t>(__builtin_popcount(actions & kThriftBits));
}

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
  // One ladder's position, and when it last moved.
  struct Ladder {
    int level = 0;
    int64_t last_step_ns = -1;
    int64_t under_since_ns = -1;
  };
  // A rate ladder (CPU, overhead): a step up when |over| (at most every
  // kCpuStepNs), one back after kRecoverNs |under|.
  void Rate(int64_t now_ns, Ladder& ladder, int steps, bool over, bool under, const std::string& over_reason,
            const std::string& under_reason);
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
  Usage last_;
  Ladder cpu_;       // gpuflame's own CPU
  Ladder overhead_;  // its time in the profiled processes
  Ladder mem_;       // its resident memory
  uint32_t actions_ = 0;
  std::vector<Change> changes_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_GUARDRAILS_H_
