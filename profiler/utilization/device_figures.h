// What the driver said about each GPU over a recording (NVML readings,
// profiler/devices/gpu_reader.h), kept per reading so that any stretch of
// it can be summed: the whole recording, or a lane's steady state (record)
// or judged window (the agent), which the verdict's step 3 (memory bound or
// not) reads. Which GPU a lane is on
// comes from the driver too: the NVML GPUs on which it listed the lane's
// process as a compute process.
// Not thread-safe: the sampler thread adds, the caller reads after joining it.
#ifndef GPUFLAME_PROFILER_UTILIZATION_DEVICE_FIGURES_H_
#define GPUFLAME_PROFILER_UTILIZATION_DEVICE_FIGURES_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "profiler/devices/gpu_reader.h"

namespace gpuflame::profiler::utilization {

// Mean and maximum of one figure over the readings that had it.
struct FigureStat {
  uint64_t n = 0;
  double sum = 0, max = 0;
  void Add(double v) {
    n++;
    sum += v;
    max = n == 1 ? v : std::max(max, v);
  }
  double mean() const { return n ? sum / static_cast<double>(n) : 0.0; }
};

// The figures of one GPU over a stretch of readings.
struct DeviceStats {
  uint64_t readings = 0;
  FigureStat util_gpu, util_memory;                        // %, NVML's classic rates
  FigureStat gpm_sm, gpm_occupancy, gpm_tensor, gpm_dram;  // %, GPM
  FigureStat memory_used;                                  // bytes
  FigureStat power_w, temperature_c, sm_clock_mhz, memory_clock_mhz;
  std::map<uint32_t, FigureStat> process_sm;  // % by host pid: per-process SM utilisation
};

class DeviceFigures {
 public:
  static constexpr size_t kMaxReadings = 1 << 17;  // per GPU: 3.6 h at 100 ms
  static constexpr size_t kMaxPids = 1024;         // pids tracked for the lane join

  explicit DeviceFigures(std::vector<GpuIdentity> gpus) : gpus_(std::move(gpus)) {}

  // One reading of every GPU, taken at |mono_ns| (CLOCK_MONOTONIC).
  void Add(uint64_t mono_ns, std::vector<GpuReading> readings);
  // Forgets readings taken before |mono_ns| (the agent keeps a minute).
  void Trim(uint64_t mono_ns);
  // The driver listed |pid| as a compute process on NVML GPU |index|.
  void OnComputeProcess(uint32_t index, uint32_t pid);

  // GPU |index|'s readings, oldest first, each at its CLOCK_MONOTONIC time.
  template <typename F>  // F(uint64_t mono_ns, const GpuReading&)
  void ForEachReading(uint32_t index, F&& f) const {
    if (auto it = readings_.find(index); it != readings_.end())
      for (const Reading& r : it->second) f(r.mono_ns, r.reading);
  }
  // GPU |index|'s figures over readings taken at or after |from_mono_ns|
  // and before |to_mono_ns| (the agent: one lane's judged stretch).
  DeviceStats Over(uint32_t index, uint64_t from_mono_ns = 0, uint64_t to_mono_ns = UINT64_MAX) const;
  // The NVML GPU a process's lane is on, where it is certain: NVML's GPU of
  // the lane's |uuid| (the process's library said it, lane_uuids.h); else
  // the process was seen on exactly one GPU and uses one CUDA device
  // (|lanes| of it), or the machine has one GPU. nullopt otherwise, with
  // why in |why|.
  std::optional<uint32_t> GpuOf(uint32_t pid, size_t lanes, const std::string& uuid, std::string* why) const;

  const std::vector<GpuIdentity>& gpus() const { return gpus_; }
  // NVML's GPU of that UUID (as nvmlDeviceGetUUID writes it), or null. Any
  // thread: the GPUs are fixed at construction.
  const GpuIdentity* GpuWithUuid(const std::string& uuid) const;
  uint64_t readings_dropped() const { return dropped_; }  // past kMaxReadings

 private:
  struct Reading {
    uint64_t mono_ns;
    GpuReading reading;
  };
  std::vector<GpuIdentity> gpus_;
  std::map<uint32_t, std::vector<Reading>> readings_;  // by NVML index
  std::map<uint32_t, std::set<uint32_t>> seen_on_;     // pid -> NVML GPUs
  uint64_t dropped_ = 0;
};

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_DEVICE_FIGURES_H_
