#include "profiler/devices/nvml.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Open(std::string library) {
  if (library.empty())
    if (const char* path = std::getenv(kLibraryVariable); path && *path) library = path;
  if (library.empty()) library = kSoname;
  auto lib = SharedLibrary::Open(library);
  if (!lib.ok()) return lib.status();
  NvmlApi api;
  api.init = lib->Function<decltype(api.init)>("nvmlInit_v2");
  api.shutdown = lib->Function<decltype(api.shutdown)>("nvmlShutdown");
  api.device_count = lib->Function<decltype(api.device_count)>("nvmlDeviceGetCount_v2");
  api.device_by_index = lib->Function<decltype(api.device_by_index)>("nvmlDeviceGetHandleByIndex_v2");
  api.compute_processes = lib->Function<decltype(api.compute_processes)>("nvmlDeviceGetComputeRunningProcesses_v3");
  api.error_string = lib->Function<decltype(api.error_string)>("nvmlErrorString");
  api.memory_info = lib->Function<decltype(api.memory_info)>("nvmlDeviceGetMemoryInfo");
  return Start(std::move(*lib), api, std::move(library));
}

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::FromApi(const NvmlApi& api, std::string name) {
  return Start(SharedLibrary(), api, std::move(name));
}

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Start(SharedLibrary library, const NvmlApi& api, std::string name) {
  // The _v3 process list is the one with MIG instance IDs (drivers of the
  // last years); an older library is said to lack it rather than read wrong.
  for (const auto& [fn, symbol] :
       {std::pair{reinterpret_cast<const void*>(api.init), "nvmlInit_v2"},
        {reinterpret_cast<const void*>(api.shutdown), "nvmlShutdown"},
        {reinterpret_cast<const void*>(api.device_count), "nvmlDeviceGetCount_v2"},
        {reinterpret_cast<const void*>(api.device_by_index), "nvmlDeviceGetHandleByIndex_v2"},
        {reinterpret_cast<const void*>(api.compute_processes), "nvmlDeviceGetComputeRunningProcesses_v3"}})
    if (!fn) return absl::NotFoundError(absl::StrCat(name, " has no ", symbol, " (a driver too old for gpuflame)"));
  std::unique_ptr<Nvml> nvml(new Nvml(std::move(library), api, std::move(name)));
  if (int r = nvml->api_.init(); r != kNvmlSuccess)
    return absl::UnavailableError(absl::StrCat(nvml->name_, ": nvmlInit_v2: ", nvml->Error(r)));
  nvml->initialized_ = true;
  return nvml;
}

Nvml::~Nvml() {
  if (initialized_) (void)api_.shutdown();  // nothing to do about a failure on the way out
}

std::string Nvml::Error(int result) const {
  const char* text = api_.error_string ? api_.error_string(result) : nullptr;
  return text ? absl::StrCat(text, " (", result, ")") : absl::StrCat("NVML error ", result);
}

absl::StatusOr<uint32_t> Nvml::DeviceCount() {
  unsigned int count = 0;
  if (int r = api_.device_count(&count); r != kNvmlSuccess)
    return absl::UnavailableError(absl::StrCat(name_, ": nvmlDeviceGetCount_v2: ", Error(r)));
  return count;
}

absl::StatusOr<NvmlDevice> Nvml::Device(uint32_t index) const {
  NvmlDevice device = nullptr;
  if (int r = api_.device_by_index(index, &device); r != kNvmlSuccess)
    return absl::UnavailableError(absl::StrCat("GPU ", index, ": nvmlDeviceGetHandleByIndex_v2: ", Error(r)));
  return device;
}

absl::StatusOr<NvmlMemory> Nvml::MemoryInfo(uint32_t index) {
  if (!api_.memory_info) return absl::UnimplementedError(absl::StrCat(name_, " has no nvmlDeviceGetMemoryInfo"));
  auto device = Device(index);
  if (!device.ok()) return device.status();
  NvmlMemory memory{};
  if (int r = api_.memory_info(*device, &memory); r != kNvmlSuccess)
    return absl::UnavailableError(absl::StrCat("GPU ", index, ": nvmlDeviceGetMemoryInfo: ", Error(r)));
  return memory;
}

absl::StatusOr<DeviceProcesses> Nvml::ComputeProcesses() {
  auto counted = DeviceCount();
  if (!counted.ok()) return counted.status();
  const uint32_t count = *counted;
  DeviceProcesses out;
  std::vector<NvmlProcessInfo> buffer;
  const uint32_t read = std::min<uint32_t>(count, kMaxDevices);
  for (uint32_t i = 0; i < read; i++)
    if (absl::Status s = ReadDevice(i, buffer, out); !s.ok()) out.unreadable.emplace_back(s.message());
  if (count > read)
    out.unreadable.push_back(
        absl::StrCat("GPUs ", read, " to ", count - 1, ": not read (gpuflame reads ", kMaxDevices, " at most)"));
  return out;
}

absl::Status Nvml::ReadDevice(uint32_t index, std::vector<NvmlProcessInfo>& buffer, DeviceProcesses& out) const {
  auto handle = Device(index);
  if (!handle.ok()) return handle.status();
  const NvmlDevice device = *handle;
  if (buffer.size() < 64) buffer.resize(64);
  for (int attempt = 0; attempt < kMaxAttempts; attempt++) {
    unsigned int n = static_cast<unsigned int>(buffer.size());
    const int r = api_.compute_processes(device, &n, buffer.data());
    if (r == kNvmlSuccess) {
      // |n| is how many it wrote; never trusted past the buffer.
      for (size_t k = 0; k < std::min<size_t>(n, buffer.size()); k++) {
        const NvmlProcessInfo& p = buffer[k];
        DeviceProcess row{index, p.pid, std::nullopt};
        if (p.used_gpu_memory != kNvmlValueNotAvailable) row.bytes = p.used_gpu_memory;
        out.processes.push_back(row);
      }
      return absl::OkStatus();
    }
    if (r != kNvmlErrorInsufficientSize)
      return absl::UnavailableError(
          absl::StrCat("GPU ", index, ": nvmlDeviceGetComputeRunningProcesses_v3: ", Error(r)));
    // |n| is how many there are now; more may start before the next call.
    if (buffer.size() >= kMaxProcessesPerDevice || n > kMaxProcessesPerDevice)
      return absl::ResourceExhaustedError(
          absl::StrCat("GPU ", index, ": ", n, " processes, over the ", kMaxProcessesPerDevice, " gpuflame reads"));
    const size_t want = std::max<size_t>(size_t{n} + n / 4 + 8, buffer.size() * 2);
    buffer.resize(std::min<size_t>(want, kMaxProcessesPerDevice));
  }
  return absl::UnavailableError(
      absl::StrCat("GPU ", index, ": its list of processes kept growing (", kMaxAttempts, " calls)"));
}

}  // namespace gpuflame::profiler
