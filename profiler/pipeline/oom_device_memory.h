// The device memory of the GPUs a process uses, for an out-of-memory
// capture (profiler/forensics/oom_capture.h): what the driver says each GPU
// has (NVML, profiler/devices/nvml.h), read when the episode opens. NVML is
// opened at the first episode, once; where it cannot be, or does not list
// the process, the capture says why ("unknown") and nothing else changes.
// A few driver calls per out-of-memory episode, never per event.
// Worker thread only.
#ifndef GPUFLAME_PROFILER_PIPELINE_OOM_DEVICE_MEMORY_H_
#define GPUFLAME_PROFILER_PIPELINE_OOM_DEVICE_MEMORY_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "profiler/devices/nvml.h"
#include "profiler/forensics/oom_capture.h"

namespace gpuflame::profiler {

class OomDeviceMemoryReader {
 public:
  using Opener = std::function<absl::StatusOr<std::unique_ptr<Nvml>>()>;
  // |open| (tests: a fake NVML); by default Nvml::Open(), which honours
  // GPUFLAME_NVML_LIBRARY.
  explicit OomDeviceMemoryReader(Opener open = nullptr);

  // The GPUs NVML lists |pid| on (its host pid), with their total and free
  // memory; a machine with one GPU, that one, listed or not (a process in
  // another pid namespace, one gone meanwhile).
  OomDeviceMemory Read(pid_t pid);

 private:
  Opener open_;
  bool tried_ = false;
  std::unique_ptr<Nvml> nvml_;
  std::string unavailable_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_OOM_DEVICE_MEMORY_H_
