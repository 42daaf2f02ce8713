// Which GPU each lane is: the UUIDs the injection library reads from the
// driver for each CUDA device of its process (GF_GPU_DEVICE records,
// cupti/device_uuids.h), in NVML's text form, so that a lane (a process's
// CUDA ordinal) is tied to NVML's GPU by name, whatever
// CUDA_VISIBLE_DEVICES renumbered and however many GPUs the process uses.
// Bounded: at most kMaxEntries (process, ordinal) pairs; past it a new
// pair is counted, not kept. Event loop only.
#ifndef GPUFLAME_PROFILER_UTILIZATION_LANE_UUIDS_H_
#define GPUFLAME_PROFILER_UTILIZATION_LANE_UUIDS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler::utilization {

// A GF_GPU_DEVICE record's UUID as NVML writes it:
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case hex.
std::string GpuUuidText(const gf_kernel_record& r);

class LaneUuids {
 public:
  static constexpr size_t kMaxEntries = 4096;
  static constexpr uint32_t kMaxOrdinal = 64;  // the library reads no more

  void OnRecord(pid_t pid, const gf_kernel_record& r);
  // Empty: the process's library has not said (no library, an older one,
  // or the driver would not tell).
  const std::string& Of(pid_t pid, uint32_t device) const;
  void Forget(pid_t pid);
  uint64_t dropped() const { return dropped_; }  // past kMaxEntries, or ordinals past kMaxOrdinal
  size_t size() const { return uuids_.size(); }

 private:
  std::map<std::pair<pid_t, uint32_t>, std::string> uuids_;
  uint64_t dropped_ = 0;
};

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_LANE_UUIDS_H_
