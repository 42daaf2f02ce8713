#include "agent/gpu_metrics.h"

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

std::vector<Metric> GpuMetrics(const std::vector<utilization::GpuNow>& gpus,
                               const std::map<std::string, std::string>& missing, const std::string& node,
                               const PodOf& pod_of, double cpu_seconds, uint64_t readings) {
  std::vector<Metric> out;
  auto labels = [&](const GpuIdentity& g) {
    Metric::Labels l = {{"gpu", absl::StrCat(g.index)}, {"uuid", g.uuid}};
    if (!node.empty()) l.emplace_back("node", node);
    return l;
  };
  // One family at a time: the exposition format wants a family's series together.
  struct Family {
    const char* name;
    const char* help;
    const utilization::FigureStat utilization::DeviceStats::*figure;
    double scale;
  };
  const Family families[] = {
      {"gpuflame_gpu_utilization_ratio",
       "Share of the driver's sample period in which a kernel ran on the GPU, any process (NVML), mean of the "
       "last readings.",
       &utilization::DeviceStats::util_gpu, 0.01},
      {"gpuflame_gpu_memory_utilization_ratio",
       "Share of the driver's sample period in which device memory was read or written (NVML).",
       &utilization::DeviceStats::util_memory, 0.01},
      {"gpuflame_gpu_sm_active_ratio", "Share of SMs with a warp resident (NVML GPM, Hopper and newer).",
       &utilization::DeviceStats::gpm_sm, 0.01},
      {"gpuflame_gpu_sm_occupancy_ratio", "Resident warps against the most the SMs hold (NVML GPM).",
       &utilization::DeviceStats::gpm_occupancy, 0.01},
      {"gpuflame_gpu_tensor_active_ratio", "Share of time a tensor pipe was active (NVML GPM).",
       &utilization::DeviceStats::gpm_tensor, 0.01},
      {"gpuflame_gpu_dram_bandwidth_ratio", "DRAM bandwidth used against its peak (NVML GPM).",
       &utilization::DeviceStats::gpm_dram, 0.01},
      {"gpuflame_gpu_memory_used_bytes", "Device memory in use, every process and the driver's own (NVML).",
       &utilization::DeviceStats::memory_used, 1},
      {"gpuflame_gpu_power_watts", "Power draw (NVML).", &utilization::DeviceStats::power_w, 1},
      {"gpuflame_gpu_temperature_celsius", "GPU temperature (NVML).", &utilization::DeviceStats::temperature_c, 1},
      {"gpuflame_gpu_sm_clock_hertz", "SM clock (NVML).", &utilization::DeviceStats::sm_clock_mhz, 1e6},
      {"gpuflame_gpu_memory_clock_hertz", "Memory clock (NVML).", &utilization::DeviceStats::memory_clock_mhz, 1e6},
  };
  for (const Family& f : families)
    for (const utilization::GpuNow& g : gpus)
      if (const utilization::FigureStat& v = g.stats.*f.figure; v.n)
        out.emplace_back(f.name, f.help, "gauge", v.mean() * f.scale, labels(g.id));
  size_t series = 0, not_exported = 0;
  for (const utilization::GpuNow& g : gpus)
    for (const auto& [pid, v] : g.stats.process_sm) {
      const PodInfo* pod = pod_of(static_cast<pid_t>(pid));
      if (!pod) continue;  // not a process the agent follows
      if (series++ >= kMaxProcessSeries) {
        not_exported++;
        continue;
      }
      Metric::Labels l = labels(g.id);
      l.emplace_back("pid", absl::StrCat(pid));
      if (pod->in_kubernetes()) {
        l.emplace_back("namespace", pod->namespace_name);
        l.emplace_back("pod", pod->pod);
        l.emplace_back("container", pod->container);
      }
      out.emplace_back("gpuflame_gpu_process_sm_utilization_ratio",
                       "Share of the driver's sample period in which the process's kernels ran on the GPU (NVML "
                       "per-process utilization).",
                       "gauge", v.mean() / 100, std::move(l));
    }
  out.emplace_back("gpuflame_gpu_process_series_not_exported", "Per-process GPU series left out past the cap of 256.",
                   "gauge", double(not_exported));
  for (const auto& [figure, why] : missing)
    out.emplace_back("gpuflame_gpu_figure_missing", "A figure the driver does not give, or whose last reading failed, with its reason (NVML).",
                     "gauge", 1.0, Metric::Labels{{"figure", figure}, {"reason", why}});
  out.emplace_back("gpuflame_gpu_readings_total", "NVML readings taken.", "counter", double(readings));
  out.emplace_back("gpuflame_gpu_readings_cpu_seconds_total", "CPU time gpuflame spent reading NVML.", "counter",
                   cpu_seconds);
  return out;
}

}  // namespace gpuflame::profiler
