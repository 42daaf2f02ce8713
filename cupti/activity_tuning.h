// How the injection library asks CUPTI for activity: which record kinds,
// how large the buffers it hands CUPTI are, and CUPTI's own buffering
// attributes. The defaults are what gpuflame ships. GPUFLAME_CUPTI_*
// variables change them without a rebuild, so that
// tests/gpu/run_kernel_breakdown.sh can measure on a GPU what each part of
// kernel time costs a launch-bound workload (issue 11): CUPTI publishes no
// per-kernel cost (../shared/reference/next-capabilities.md §2.3), so the
// only way to know is to switch one part at a time.
//   GPUFLAME_CUPTI_KINDS=kernel,memcpy,memset,sync,overhead
//                                       (default: kernel,memcpy,memset)
//   GPUFLAME_CUPTI_BUFFER_KB=N          buffers we hand CUPTI (default 1024)
//   GPUFLAME_CUPTI_DEVICE_BUFFER_MB=N   CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE
//   GPUFLAME_CUPTI_PINNED=0|1           CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED
//   GPUFLAME_CUPTI_PER_THREAD=0|1       CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER
//   GPUFLAME_CUPTI_ZEROED=0|1           we hand CUPTI zeroed buffers, so it
//                                       does not zero them on the launching thread
//   GPUFLAME_CUPTI_FLUSH_PERIOD_MS=N    cuptiActivityFlushPeriod (default: CUPTI's heuristics)
// Unset or malformed values keep CUPTI's (or gpuflame's) default, and a
// malformed value is said once on the workload's stderr.
#ifndef GPUFLAME_CUPTI_ACTIVITY_TUNING_H_
#define GPUFLAME_CUPTI_ACTIVITY_TUNING_H_

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

namespace gpuflame::cupti {

// The kinds gpuflame reads, in the order they are enabled. SYNCHRONIZATION
// is the CPU's waits in synchronise calls (profiler/utilization/); OVERHEAD
// is CUPTI's account of its own cost.
inline constexpr CUpti_ActivityKind kActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_OVERHEAD};
inline constexpr const char* kActivityKindNames[] = {"kernel", "memcpy", "memset", "sync", "overhead"};
inline constexpr uint32_t kAllActivityKinds = (1u << std::size(kActivityKinds)) - 1;
// What gpuflame enables unless told otherwise: the GPU's work (kernels,
// copies, memsets). Synchronisation and overhead records are asked for by
// name: on the H200's launch-bound training step, each added more to the
// step than it told (tests/gpu/run_kernel_breakdown.sh; README, "Measured").
inline constexpr uint32_t kDefaultActivityKinds = 0b00111;

struct ActivityTuning {
  uint32_t kinds = kDefaultActivityKinds;  // bit i: kActivityKinds[i]
  size_t buffer_bytes = 1 << 20;
  bool zeroed_buffers = false;
  // CUPTI's attributes, where set (-1 / 0: CUPTI's default).
  size_t device_buffer_bytes = 0;
  int pinned = -1;
  int per_thread = -1;
  uint32_t flush_period_ms = 0;
  std::string error;  // a value that could not be read, said once on stderr

  // The kinds to enable, in order.
  std::vector<CUpti_ActivityKind> Kinds() const;
  // One line for GPUFLAME_CUPTI_DEBUG and the benchmark's log: what differs
  // from the defaults ("defaults" when nothing does).
  std::string Describe() const;
};

// From the environment, through |get| (std::getenv in the library, a map in tests).
ActivityTuning TuningFromEnv(const char* (*get)(const char*));

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_ACTIVITY_TUNING_H_
