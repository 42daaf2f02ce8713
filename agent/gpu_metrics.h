// The driver's figures of each GPU as the agent's Prometheus metrics
// (/metrics), over the last seconds of readings: NVML's classic
// utilisation, GPM's SM activity, occupancy, tensor and DRAM-bandwidth
// shares (Hopper and newer), memory, power, temperature, clocks, and the
// per-process SM utilisation of the processes the agent follows, with
// their pod. Every GPU of the node gets them, whether or not its processes
// load the injection library. A figure the driver does not give is absent,
// and gpuflame_gpu_figure_missing says why.
//
// Cardinality: per GPU (index, UUID) 11 gauges; per followed process on a
// GPU one, at most kMaxProcessSeries in all; one series per missing figure.
#ifndef GPUFLAME_AGENT_GPU_METRICS_H_
#define GPUFLAME_AGENT_GPU_METRICS_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/metrics_server.h"
#include "profiler/process/k8s_metadata.h"
#include "profiler/utilization/gpu_sampler.h"

namespace gpuflame::profiler {

inline constexpr size_t kMaxProcessSeries = 256;

// A followed process's pod, or null where the agent does not follow |pid|.
using PodOf = std::function<const PodInfo*(pid_t pid)>;

// |gpus|: GpuSampler::Recent; |missing|: GpuSampler::Missing; |node|: the
// node label (empty: none); |cpu_seconds| and |readings|: the readings' own
// cost so far.
std::vector<Metric> GpuMetrics(const std::vector<utilization::GpuNow>& gpus,
                               const std::map<std::string, std::string>& missing, const std::string& node,
                               const PodOf& pod_of, double cpu_seconds, uint64_t readings);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_GPU_METRICS_H_
