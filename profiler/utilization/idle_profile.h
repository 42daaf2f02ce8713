// gpu_idle: the idle-time flame graph. Each idle gap's time (a GPU of the
// process idle for the gap threshold or longer) charged to the CPU stacks
// its process's threads were sampled in during the gap, evenly, so the
// profile's total is the GPUs' idle time itself; a gap in which no thread
// was on the CPU (all blocked: waiting on a queue, a lock, a synchronise
// call that sleeps) goes to kNoThreadOnCpuFrame; the start-up's idle time
// sits under kStartUpFrame, at the root. In Pyroscope:
// gpu_idle:idle:nanoseconds:idle:nanoseconds. Labels: pid, process, gpu
// (the process's CUDA ordinal), phase (start-up or steady: report.h).
#ifndef GPUFLAME_PROFILER_UTILIZATION_IDLE_PROFILE_H_
#define GPUFLAME_PROFILER_UTILIZATION_IDLE_PROFILE_H_

#include <sys/types.h>

#include <string>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/profile.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/utilization/utilization.h"

namespace gpuflame::profiler::utilization {

inline constexpr const char* kGpuIdleProfile = "gpu_idle";
inline constexpr const char* kNoThreadOnCpuFrame = "[GPU idle, no thread of the process on the CPU]";
// The root of the start-up's idle time (its gaps are also labelled phase=start-up).
inline constexpr const char* kStartUpFrame = "[start-up: before the steady state]";

Profile BuildIdleProfile(StackSource source, const IdleJoin& join, const absl::flat_hash_map<pid_t, std::string>& comm,
                         int64_t time_nanos, int64_t duration_nanos);

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_IDLE_PROFILE_H_
