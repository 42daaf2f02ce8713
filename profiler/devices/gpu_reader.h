// What the driver says each GPU is doing, read from NVML (nvml.h) at a fixed
// interval: the classic utilisation rates (the share of the driver's sample
// period in which a kernel ran; in which device memory was read or
// written), per-process SM utilisation, memory used, power, temperature and
// clocks, and on Hopper and newer the GPM metrics, computed by the driver
// between two samples of the GPU's performance counters: SM activity, SM
// occupancy, tensor-pipe activity and DRAM bandwidth, as shares of their
// peaks. Every figure names its source; a figure the driver does not give
// (no GPM before Hopper, no power on some boards, per-process figures
// under MIG) is said missing, with NVML's reason, and never read again:
// nothing is estimated in its place.
//
// A reading is a few driver calls per GPU (GPM: one sample and one
// computation). One thread owns a reader (its own Nvml: NVML counts its
// initializations), here record's sampler thread.
#ifndef GPUFLAME_PROFILER_DEVICES_GPU_READER_H_
#define GPUFLAME_PROFILER_DEVICES_GPU_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/devices/nvml.h"

namespace gpuflame::profiler {

// NVML's types for these readings (nvml.h, NVML_API_VERSION 13).
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlProcessUtilization {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long time_us;  // CPU time, µs since the epoch
  unsigned int sm_util, mem_util, enc_util, dec_util;
};
static_assert(sizeof(NvmlProcessUtilization) == 32, "nvmlProcessUtilizationSample_t's layout");
struct NvmlGpmSupport {  // nvmlGpmSupport_t, version 1
  unsigned int version;
  unsigned int is_supported_device;
};
struct NvmlGpmSampleOpaque;
using NvmlGpmSample = NvmlGpmSampleOpaque*;  // nvmlGpmSample_t
struct NvmlGpmMetric {                       // nvmlGpmMetric_t
  unsigned int metric_id;
  int result;  // nvmlReturn_t
  double value;
  struct {
    char* short_name;
    char* long_name;
    char* unit;
  } info;
};
static_assert(sizeof(NvmlGpmMetric) == 40, "nvmlGpmMetric_t's layout");
// nvmlGpmMetricsGet_t with room for the metrics gpuflame asks for: NVML
// reads and writes |num_metrics| entries (nvml.h declares the array
// NVML_GPM_METRIC_MAX long, a number that grows between drivers).
inline constexpr unsigned int kGpmMetricsAsked = 4;
struct NvmlGpmMetricsGet {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION, 1
  unsigned int num_metrics;
  NvmlGpmSample sample1, sample2;
  NvmlGpmMetric metrics[kGpmMetricsAsked];
};
// GPM metric IDs (nvmlGpmMetricId_t).
inline constexpr unsigned int kGpmSmUtil = 2, kGpmSmOccupancy = 3, kGpmAnyTensorUtil = 5, kGpmDramBwUtil = 10;

// The entry points of these readings: each optional, a missing one makes
// its figure missing.
struct NvmlReadingApi {
  int (*uuid)(NvmlDevice, char* uuid, unsigned int length) = nullptr;  // nvmlDeviceGetUUID
  int (*name)(NvmlDevice, char* name, unsigned int length) = nullptr;  // nvmlDeviceGetName
  int (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;          // nvmlDeviceGetUtilizationRates
  int (*process_utilization)(NvmlDevice, NvmlProcessUtilization*, unsigned int* count,
                             unsigned long long last_seen_us) = nullptr;  // nvmlDeviceGetProcessUtilization
  int (*power)(NvmlDevice, unsigned int* mw) = nullptr;                   // nvmlDeviceGetPowerUsage
  int (*temperature)(NvmlDevice, int sensor, unsigned int* c) = nullptr;  // nvmlDeviceGetTemperature
  int (*clock)(NvmlDevice, int type, unsigned int* mhz) = nullptr;        // nvmlDeviceGetClockInfo
  int (*gpm_support)(NvmlDevice, NvmlGpmSupport*) = nullptr;              // nvmlGpmQueryDeviceSupport
  int (*gpm_alloc)(NvmlGpmSample*) = nullptr;                             // nvmlGpmSampleAlloc
  int (*gpm_free)(NvmlGpmSample) = nullptr;                               // nvmlGpmSampleFree
  int (*gpm_sample)(NvmlDevice, NvmlGpmSample) = nullptr;                 // nvmlGpmSampleGet
  int (*gpm_metrics)(NvmlGpmMetricsGet*) = nullptr;                       // nvmlGpmMetricsGet
};

// What the GPM metrics said over the period between two readings, in % of
// each one's peak.
struct GpmFigures {
  double sm_util = 0;       // SMs with at least one warp resident
  double sm_occupancy = 0;  // resident warps vs the most the SMs hold
  double tensor_util = 0;   // any tensor pipe active
  double dram_bw_util = 0;  // DRAM bandwidth vs its peak
};

struct ProcessUtilization {
  uint32_t pid = 0;                    // the host's pid namespace
  uint32_t sm_util = 0, mem_util = 0;  // % of the driver's sample period, averaged over its samples
  uint32_t samples = 0;
};

// One GPU at one reading; what is not there was missing (GpuReader::missing).
struct GpuReading {
  uint32_t index = 0;                                 // NVML's
  std::optional<uint32_t> util_gpu, util_memory;      // %, classic rates
  std::optional<uint64_t> memory_used, memory_total;  // bytes
  std::optional<uint32_t> power_mw, temperature_c, sm_clock_mhz, memory_clock_mhz;
  std::optional<GpmFigures> gpm;              // none at a GPU's first reading, or without GPM
  std::vector<ProcessUtilization> processes;  // those the driver sampled since the last reading
};

struct GpuIdentity {
  uint32_t index = 0;
  std::string uuid, name;  // empty where NVML would not say
  bool gpm = false;        // GPM metrics are read
};

class GpuReader {
 public:
  // GPUs read at most (NVML's indices from 0), processes per reading.
  static constexpr uint32_t kMaxDevices = 64;
  static constexpr unsigned int kMaxProcessSamples = 4096;

  // Opens NVML (Nvml::Open's |library|), resolves the readings' entry
  // points and sets up GPM on the GPUs that have it. An error only where
  // NVML itself is missing or no GPU can be counted.
  static absl::StatusOr<std::unique_ptr<GpuReader>> Open(std::string library = "");
  // Over a function table (unit tests); |nvml| from Nvml::FromApi.
  static absl::StatusOr<std::unique_ptr<GpuReader>> FromApi(std::unique_ptr<Nvml> nvml, const NvmlReadingApi& api);
  GpuReader(const GpuReader&) = delete;
  GpuReader& operator=(const GpuReader&) = delete;
  ~GpuReader();  // frees the GPM samples before NVML shuts down

  // Every GPU's figures now (GPM and per-process figures: since the last
  // call). GPM needs its two samples more than 100 ms apart: a call within
  // 110 ms of the last sample gives no GPM figures (at a 100 ms interval,
  // GPM covers every other reading's 200 ms).
  // |processes|: per-process figures too. On the H200 (driver 580) that
  // call costs 2 to 3.5 ms of CPU, ten times all the others together: the
  // sampler asks for it once a second, and the driver's samples since the
  // last such reading come with it.
  std::vector<GpuReading> Read(uint64_t now_ns, bool processes = true);
  // Which processes have a compute context on which GPU (Nvml's).
  absl::StatusOr<DeviceProcesses> ComputeProcesses();
  const std::vector<GpuIdentity>& gpus() const { return gpus_; }
  // "GPU 0 power: Not Supported (3)": each figure missing as of its last
  // attempt, with NVML's words: for good (the driver does not have it),
  // or a reading that failed and has not succeeded since. A figure read
  // again after a failure is no longer missing; failed() keeps its count.
  const std::map<std::string, std::string>& missing() const { return missing_; }
  // Each figure whose reading failed at least once though the driver has
  // it (a transient error): how many readings failed, and the last reason.
  struct Failures {
    uint64_t readings = 0;
    std::string last;
  };
  const std::map<std::string, Failures>& failed() const { return failed_; }
  const std::string& library() const { return nvml_->name(); }
  // What each kind of driver call cost this thread, by figure: calls and
  // CPU time (CLOCK_THREAD_CPUTIME_ID) and wall time in them.
  struct CallCost {
    uint64_t calls = 0, cpu_ns = 0, wall_ns = 0;
  };
  const std::map<std::string, CallCost>& costs() const { return costs_; }

 private:
  struct Device {
    NvmlDevice handle = nullptr;
    NvmlGpmSample samples[2] = {nullptr, nullptr};
    int current = -1;  // the sample taken last; -1: none yet
    uint64_t sampled_ns = 0;
    unsigned long long last_seen_us = 0;  // per-process samples already read
    // Figures that failed for good (NOT_SUPPORTED, or no entry point).
    bool no_util = false, no_processes = false, no_memory = false, no_power = false, no_temperature = false,
         no_clocks = false;
  };
  GpuReader(std::unique_ptr<Nvml> nvml, const NvmlReadingApi& api) : nvml_(std::move(nvml)), api_(api) {}
  void Setup();
  // Notes |figure| of GPU |index| missing with NVML's |result|; true when
  // it will stay so (the driver does not have it), so it is not asked again.
  bool Missing(uint32_t index, const char* figure, int result);
  // The same with a reason already in words; |permanent| as Missing's result.
  void NoteMissing(const std::string& key, const std::string& why, bool permanent);
  // |figure| of GPU |index| was read: missing no more (its failures stay counted).
  void Read(uint32_t index, const char* figure);
  void ReadGpm(uint32_t index, Device& d, uint64_t now_ns, GpuReading& out);
  void ReadProcesses(uint32_t index, Device& d, GpuReading& out);

  std::unique_ptr<Nvml> nvml_;
  NvmlReadingApi api_;
  std::vector<Device> devices_;
  uint64_t read_started_ = 0;  // CLOCK_MONOTONIC at the current Read's start (ReadGpm times its samples from it)
  std::vector<GpuIdentity> gpus_;
  std::vector<NvmlProcessUtilization> buffer_;
  std::map<std::string, std::string> missing_;
  std::map<std::string, Failures> failed_;
  std::map<std::string, CallCost> costs_;
  friend class CostTimer;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_DEVICES_GPU_READER_H_
