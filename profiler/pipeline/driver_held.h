// Device memory that processes found running held before gpuflame attached
// to them (the agent's start, `record --pid`: ProcessInfo::attached_late),
// as the driver counts it (NVML, profiler/devices/nvml.h): charged to the
// event processor's kHeldBeforeAttachFrame, so that their gpu_memory in use
// matches what the driver says they hold instead of starting at zero. The
// tensor-level counterpart is EventProcessor::AccountAllocatedBeforeAttach.
//
// NVML is opened the first time a late process needs it, once: where it
// cannot be, that is said once (TakeWarnings, unavailable()) and nothing
// else changes. Off the hot path: a reading at attach, and one per profile
// build while a process still has something under the frame (to lower it
// when memory from before is freed). Worker thread only.
#ifndef GPUFLAME_PROFILER_PIPELINE_DRIVER_HELD_H_
#define GPUFLAME_PROFILER_PIPELINE_DRIVER_HELD_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "profiler/devices/nvml.h"
#include "profiler/pipeline/event_processor.h"

namespace gpuflame::profiler {

class DriverHeld {
 public:
  using Opener = std::function<absl::StatusOr<std::unique_ptr<Nvml>>()>;
  // |open| (tests: a fake NVML); by default Nvml::Open(), which honours
  // GPUFLAME_NVML_LIBRARY.
  explicit DriverHeld(Opener open = nullptr);

  // |pids| were attached late, their probes in place. What the driver says
  // each holds, less what we count live for it (allocations made between
  // its probes and the reading, read from the ring by |drain|), goes under
  // its kHeldBeforeAttachFrame.
  void OnAttached(std::span<const pid_t> pids, EventProcessor& events, const std::function<void()>& drain);
  // Before profiles are built: the processes with something under the frame
  // are read again, and it is lowered where the driver now holds less than
  // it plus what we count live (memory from before was freed; its free
  // matched nothing). Never raised. Processes that |exited| says are gone,
  // or whose live set froze (interpreter shutdown), keep theirs as it was.
  void Refresh(EventProcessor& events, const std::function<bool(pid_t)>& exited, const std::function<void()>& drain);

  // Messages for the user, each once.
  std::vector<std::string> TakeWarnings() { return std::exchange(warnings_, {}); }
  // Why NVML could not be used ("" when it could, or was never needed).
  const std::string& unavailable() const { return unavailable_; }

  // A reading is taken while the processes' device-level in use stays the
  // same across it (drained before and after): otherwise a free or an
  // allocation between the driver's figure and ours would be counted on one
  // side only. Tried this many times.
  static constexpr int kQuietAttempts = 3;

 private:
  struct Reading {
    absl::flat_hash_map<uint32_t, uint64_t> driver;  // pid -> bytes on all GPUs (those the driver lists with a figure)
    absl::flat_hash_set<uint32_t> quiet;             // pids whose in use did not move across the reading
  };
  Nvml* Get();
  // Drains, reads the driver, drains again: for each of |pids|, its figure
  // and whether it was quiet (see kQuietAttempts).
  Reading ReadQuietly(std::span<const pid_t> pids, EventProcessor& events, const std::function<void()>& drain);
  absl::flat_hash_map<uint32_t, uint64_t> ReadDriver(std::span<const pid_t> pids);
  void Warn(std::string message);

  Opener open_;
  bool tried_ = false;
  std::unique_ptr<Nvml> nvml_;
  std::string unavailable_;
  absl::flat_hash_set<uint32_t> charged_;  // pids with something under the frame, to refresh
  static constexpr size_t kMaxWarned = 4096;
  absl::flat_hash_set<std::string> warned_;
  std::vector<std::string> warnings_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_DRIVER_HELD_H_
