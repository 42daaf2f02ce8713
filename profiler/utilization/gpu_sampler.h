// The thread that reads NVML (GpuReader) once per window, into
// DeviceFigures; per-process figures, and which processes the driver lists
// on which GPU (the lane join), once a second. Its own thread, not the
// event loop: a driver call can take milliseconds, and no event waits
// behind it. It touches nothing but its reader and figures; the figures are
// read under a lock (the agent, while it runs) or after Stop (record).
#ifndef GPUFLAME_PROFILER_UTILIZATION_GPU_SAMPLER_H_
#define GPUFLAME_PROFILER_UTILIZATION_GPU_SAMPLER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/devices/gpu_reader.h"
#include "profiler/utilization/device_figures.h"

namespace gpuflame::profiler::utilization {

struct GpuSamplerOptions {
  std::chrono::milliseconds interval{100};
  // Readings older than this are forgotten (0: kept, up to
  // DeviceFigures::kMaxReadings: record's whole run).
  std::chrono::seconds retention{0};
};

// One GPU's identity and figures over a stretch.
struct GpuNow {
  GpuIdentity id;
  DeviceStats stats;
};

class GpuSampler {
 public:
  GpuSampler(std::unique_ptr<GpuReader> reader, GpuSamplerOptions options);
  ~GpuSampler();  // stops
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Takes one last reading, joins the thread; the figures are final after.
  void Stop();
  // Any thread, while it runs: each GPU's figures over the readings taken
  // at or after |from_mono_ns|, and the figures missing so far.
  std::vector<GpuNow> Recent(uint64_t from_mono_ns) const;
  std::map<std::string, std::string> Missing() const;
  // Any thread: GPU |index|'s figures over readings taken in
  // [from_mono_ns, to_mono_ns) (the agent's join of a lane's window).
  DeviceStats Over(uint32_t index, uint64_t from_mono_ns, uint64_t to_mono_ns) const;

  const DeviceFigures& figures() const { return figures_; }  // after Stop
  // Any thread: NVML's GPU of that UUID, or null (DeviceFigures::GpuWithUuid).
  const GpuIdentity* GpuWithUuid(const std::string& uuid) const { return figures_.GpuWithUuid(uuid); }
  const GpuReader& reader() const { return *reader_; }       // after Stop
  // gpuflame's own cost of the readings: CPU time in them, and how many
  // (any thread).
  uint64_t cpu_ns() const { return cpu_ns_.load(std::memory_order_relaxed); }
  uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }

 private:
  void Run();
  void ReadOnce(bool last = false);  // |last|: the per-process figures whatever the second

  std::unique_ptr<GpuReader> reader_;
  const GpuSamplerOptions options_;
  mutable std::mutex figures_mu_;  // figures_ and missing_ while the thread runs
  DeviceFigures figures_;
  std::map<std::string, std::string> missing_;  // the reader's, copied after each reading
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> cpu_ns_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // under mu_
  std::thread thread_;
};

}  // namespace gpuflame::profiler::utilization

#endif  // GPUFLAME_PROFILER_UTILIZATION_GPU_SAMPLER_H_
