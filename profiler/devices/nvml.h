// NVML, the GPU driver's management library (libnvidia-ml.so.1, installed
// with the driver), opened at run time: what the driver says each process
// holds on each GPU, its CUDA context included. Only the few entry points
// used here are resolved (dlsym), with NVML's own types (nvml.h of CUDA 13,
// NVML_API_VERSION 13: layouts below), so gpuflame needs no NVML to build or
// to run: where the library is absent, Open says why and nothing else changes.
// Not thread-safe (NVML is, this owner is not): the worker only. A reading is
// a few driver calls per GPU: taken at attach and per profile build, never
// per event.
#ifndef GPUFLAME_PROFILER_DEVICES_NVML_H_
#define GPUFLAME_PROFILER_DEVICES_NVML_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/devices/shared_library.h"

namespace gpuflame::profiler {

// nvmlProcessInfo_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it
// (nvml.h's nvmlProcessInfo_v2_t layout: the MIG instance IDs follow pid and
// usedGpuMemory; 24 bytes with the padding after pid).
struct NvmlProcessInfo {
  uint32_t pid;
  uint64_t used_gpu_memory;  // bytes, or kNvmlValueNotAvailable
  uint32_t gpu_instance_id;
  uint32_t compute_instance_id;
};
static_assert(sizeof(NvmlProcessInfo) == 24, "nvmlProcessInfo_t's layout");

// NVML_VALUE_NOT_AVAILABLE: usedGpuMemory under WDDM, and under some MIG and
// container setups where the driver does not say.
inline constexpr uint64_t kNvmlValueNotAvailable = ~0ull;
// The nvmlReturn_t values told apart here (the rest are errors, named by
// nvmlErrorString).
inline constexpr int kNvmlSuccess = 0;
inline constexpr int kNvmlErrorInsufficientSize = 7;

// nvmlMemory_t, as nvmlDeviceGetMemoryInfo (v1, every driver) fills it:
// bytes; used = reserved + allocated.
struct NvmlMemory {
  uint64_t total;
  uint64_t free;
  uint64_t used;
};
static_assert(sizeof(NvmlMemory) == 24, "nvmlMemory_t's layout");

struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;  // nvmlDevice_t

// The entry points, by NVML's names. nvmlReturn_t is an enum, passed as int.
struct NvmlApi {
  int (*init)() = nullptr;                                                   // nvmlInit_v2
  int (*shutdown)() = nullptr;                                               // nvmlShutdown
  int (*device_count)(unsigned int* count) = nullptr;                        // nvmlDeviceGetCount_v2
  int (*device_by_index)(unsigned int index, NvmlDevice* device) = nullptr;  // nvmlDeviceGetHandleByIndex_v2
  int (*compute_processes)(NvmlDevice, unsigned int* count, NvmlProcessInfo* infos) = nullptr;
  // ^ nvmlDeviceGetComputeRunningProcesses_v3
  const char* (*error_string)(int result) = nullptr;             // nvmlErrorString; optional
  int (*memory_info)(NvmlDevice, NvmlMemory* memory) = nullptr;  // nvmlDeviceGetMemoryInfo; optional
};

// What the driver says one process holds on one GPU.
struct DeviceProcess {
  uint32_t device = 0;  // NVML's index
  // A pid in the host's pid namespace: NVML asks the kernel driver, which
  // knows processes by their host pids. The agent runs with hostPID, so these
  // are the pids it follows; a gpuflame in a pid namespace of its own would
  // not find its processes here.
  uint32_t pid = 0;
  std::optional<uint64_t> bytes;  // none: NVML_VALUE_NOT_AVAILABLE
};

struct DeviceProcesses {
  std::vector<DeviceProcess> processes;
  // GPUs that could not be read, each with why; the others are in |processes|.
  std::vector<std::string> unreadable;
};

class Nvml {
 public:
  static constexpr const char* kSoname = "libnvidia-ml.so.1";
  // Where to load NVML from instead of the dynamic loader's search (a path):
  // for a driver installed outside it, and for tests' simulated NVML.
  static constexpr const char* kLibraryVariable = "GPUFLAME_NVML_LIBRARY";
  // Bounds on what one reading holds: GPUs read, processes per GPU, calls
  // per GPU while its list grows under us.
  static constexpr uint32_t kMaxDevices = 64;
  static constexpr uint32_t kMaxProcessesPerDevice = 4096;
  static constexpr int kMaxAttempts = 4;

  // Loads |library| (empty: $GPUFLAME_NVML_LIBRARY if set, else the soname),
  // resolves the entry points and initializes NVML (nvmlInit_v2). Errors say
  // which step failed and why, in NVML's words.
  static absl::StatusOr<std::unique_ptr<Nvml>> Open(std::string library = "");
  // The same over a function table that outlives the result (unit tests).
  static absl::StatusOr<std::unique_ptr<Nvml>> FromApi(const NvmlApi& api, std::string name = "NVML");
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml();  // nvmlShutdown (NVML counts its initializations), then the library closes

  // Every process with a compute context on each GPU (up to kMaxDevices), as
  // nvmlDeviceGetComputeRunningProcesses lists it. An error only when no GPU
  // could be asked at all (the count failed); a GPU that fails alone is in
  // |unreadable|.
  absl::StatusOr<DeviceProcesses> ComputeProcesses();
  // How many GPUs the driver has (nvmlDeviceGetCount_v2).
  absl::StatusOr<uint32_t> DeviceCount();
  // GPU |index|'s memory: total, free, used (nvmlDeviceGetMemoryInfo; an
  // error where this NVML lacks it).
  absl::StatusOr<NvmlMemory> MemoryInfo(uint32_t index);
  // The library's name or path, for messages.
  const std::string& name() const { return name_; }
  // GPU |index|'s handle (nvmlDeviceGetHandleByIndex_v2).
  absl::StatusOr<NvmlDevice> Device(uint32_t index) const;
  // Another entry point of the library, for readers of further figures
  // (gpu_reader.h): null where it lacks it, or over a function table.
  void* Symbol(const char* symbol) const { return library_.valid() ? library_.Symbol(symbol) : nullptr; }
  // NVML's words for |result|, with its number.
  std::string Error(int result) const;

 private:
  Nvml(SharedLibrary library, const NvmlApi& api, std::string name)
      : library_(std::move(library)), api_(api), name_(std::move(name)) {}
  static absl::StatusOr<std::unique_ptr<Nvml>> Start(SharedLibrary library, const NvmlApi& api, std::string name);
  // One GPU's processes into |out|, through |buffer| (reused between GPUs):
  // grown to what NVML asks for when it answers INSUFFICIENT_SIZE, within
  // kMaxProcessesPerDevice, at most kMaxAttempts calls.
  absl::Status ReadDevice(uint32_t index, std::vector<NvmlProcessInfo>& buffer, DeviceProcesses& out) const;

  SharedLibrary library_;  // first: closed last, after nvmlShutdown
  NvmlApi api_;
  std::string name_;
  bool initialized_ = false;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_DEVICES_NVML_H_
