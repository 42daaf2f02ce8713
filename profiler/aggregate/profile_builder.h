// Builds the exporter-neutral profiles from what the event loop accumulated:
// `gpu_memory` (device level) and `torch_memory` (tensor level), each with
// alloc_objects/alloc_space/inuse_objects/inuse_space, labelled per process.
#ifndef GPUFLAME_PROFILER_AGGREGATE_PROFILE_BUILDER_H_
#define GPUFLAME_PROFILER_AGGREGATE_PROFILE_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/allocation_tracker.h"
#include "profiler/aggregate/profile.h"
#include "profiler/aggregate/time_tracker.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

// The interned stacks and frames that profiles refer to (the pipeline's).
struct StackSource {
  const StackTable& stacks;
  const FrameTable& frames;
};

// Samples of |p| for stacks of the event loop: their frames are copied into
// |p| once each (re-indexed to those used), and each sample is labelled with
// its process (pid, and `process` from |comm|).
class SampleMaker {
 public:
  SampleMaker(StackSource source, const absl::flat_hash_map<pid_t, std::string>& comm, Profile& p);
  Sample Make(const StackInfo& stack);
  // A sample of no frames yet, labelled with |pid|'s process (for a marker
  // stack the caller adds).
  Sample Labelled(pid_t pid) const;

 private:
  StackSource source_;
  const absl::flat_hash_map<pid_t, std::string>& comm_;
  Profile& p_;
  std::vector<int64_t> remap_;
};

// One memory profile from per-stack |counters| (the tracker's, or a window's),
// for one process when |pid| is given. |comm| names processes for the
// `process` label (pid -> name).
Profile BuildMemoryProfile(StackSource source, const std::vector<StackCounters>& counters, uint8_t domain,
                           const absl::flat_hash_map<pid_t, std::string>& comm, std::optional<pid_t> pid,
                           int64_t time_nanos, int64_t duration_nanos);

// What a memory profile says about its peak_* sample types (one process's).
std::string DescribePeak(const PeakSummary& peak, PeakScope scope);

enum class TimeKind { kCpu, kGpuKernel };

// `process_cpu` (cpu/nanoseconds) or `gpu_kernel` (time/nanoseconds and
// launches/count) from a TimeTracker's totals or window.
// |period_ns| is the CPU sampling period (ignored for kernel time).
Profile BuildTimeProfile(StackSource source, const TimeTracker& tracker, int64_t period_ns,
                         const absl::flat_hash_map<TimeKey, TimeCounters>& counters, TimeKind kind,
                         const absl::flat_hash_map<pid_t, std::string>& comm, std::optional<pid_t> pid,
                         int64_t time_nanos, int64_t duration_nanos);

inline constexpr const char* kGpuMemoryProfile = "gpu_memory";
inline constexpr const char* kTorchMemoryProfile = "torch_memory";
inline constexpr const char* kCpuProfile = "process_cpu";
inline constexpr const char* kGpuKernelProfile = "gpu_kernel";

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_PROFILE_BUILDER_H_
