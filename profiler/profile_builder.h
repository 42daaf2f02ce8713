// Builds the exporter-neutral profiles from what the event loop accumulated:
// `gpu_memory` (device level) and `torch_memory` (tensor level), each with
// alloc_objects/alloc_space/inuse_objects/inuse_space, labelled per process.
#ifndef GPUFLAME_PROFILER_PROFILE_BUILDER_H_
#define GPUFLAME_PROFILER_PROFILE_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "exporters/profile.h"
#include "profiler/event_processor.h"

namespace gpuflame::profiler {

// One memory profile from per-stack |counters| (the tracker's, or a window's),
// for one process when |pid| is given. |comm| names processes for the
// `process` label (pid -> name).
exporters::Profile BuildMemoryProfile(const EventProcessor& events,
                                      const std::vector<StackCounters>& counters, uint8_t domain,
                                      const absl::flat_hash_map<pid_t, std::string>& comm,
                                      std::optional<pid_t> pid, int64_t time_nanos,
                                      int64_t duration_nanos);

enum class TimeKind { kCpu, kGpuKernel };

// `process_cpu` (cpu/nanoseconds) or `gpu_kernel` (time/nanoseconds and
// launches/count) from a TimeTracker's totals or window.
exporters::Profile BuildTimeProfile(const EventProcessor& events, const TimeTracker& tracker,
                                    const absl::flat_hash_map<TimeKey, TimeCounters>& counters, TimeKind kind,
                                    const absl::flat_hash_map<pid_t, std::string>& comm,
                                    std::optional<pid_t> pid, int64_t time_nanos, int64_t duration_nanos);

inline constexpr const char* kGpuMemoryProfile = "gpu_memory";
inline constexpr const char* kTorchMemoryProfile = "torch_memory";
inline constexpr const char* kCpuProfile = "process_cpu";
inline constexpr const char* kGpuKernelProfile = "gpu_kernel";

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROFILE_BUILDER_H_
