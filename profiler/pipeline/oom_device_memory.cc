#include "profiler/pipeline/oom_device_memory.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

OomDeviceMemoryReader::OomDeviceMemoryReader(Opener open) : open_(std::move(open)) {
  if (!open_) open_ = [] { return Nvml::Open(); };
}

OomDeviceMemory OomDeviceMemoryReader::Read(pid_t pid) {
  OomDeviceMemory out;
  if (!tried_) {
    tried_ = true;
    auto nvml = open_();
    if (nvml.ok()) nvml_ = std::move(*nvml);
    else unavailable_ = absl::StrCat("NVML unavailable: ", nvml.status().message());
  }
  if (!nvml_) {
    out.unknown = unavailable_;
    return out;
  }
  auto listed = nvml_->ComputeProcesses();
  if (!listed.ok()) {
    out.unknown = std::string(listed.status().message());
    return out;
  }
  std::vector<uint32_t> gpus;
  for (const DeviceProcess& p : listed->processes)
    if (p.pid == static_cast<uint32_t>(pid) && (gpus.empty() || gpus.back() != p.device)) gpus.push_back(p.device);
  if (gpus.empty()) {
    auto count = nvml_->DeviceCount();
    if (!count.ok() || *count != 1) {
      out.unknown = absl::StrCat("the driver lists no context of pid ", pid, " on any of ",
                                 count.ok() ? absl::StrCat(*count) : std::string("its"), " GPUs");
      return out;
    }
    gpus.push_back(0);
  }
  for (uint32_t index : gpus) {
    auto memory = nvml_->MemoryInfo(index);
    if (!memory.ok()) {
      out.gpus.clear();
      out.unknown = std::string(memory.status().message());
      return out;
    }
    out.gpus.push_back({index, memory->total, memory->free});
  }
  return out;
}

}  // namespace gpuflame::profiler
