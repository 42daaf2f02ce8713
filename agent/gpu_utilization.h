// Why the GPU idles, continuously: each followed process's GPUs (a lane: a
// process and its CUDA ordinal), judged from CUPTI's activity records inside
// the library's on-spans only (profiler/utilization/windowed_lane.h), one
// judgement per agent window, as Prometheus metrics on /metrics.
//
// Gauges of the last window that observed the lane (a window with nothing
// observed keeps the last figures): busy and idle-gap ratios of the observed
// time, coverage (observed share of the window: the duty cycle's 10% in
// the steady state), kernel duration P50/P95/max, the share of kernels
// under 10 us, and the verdict (report.h) as an info-style gauge, one
// series a lane, the verdict in its label. Counters since the lane was first
// seen: observed, busy and idle-gap seconds, idle gaps, kernels, copy bytes
// by direction, synchronise wait seconds. Counts are of what was observed,
// never scaled by the duty cycle's weight: rates of them are a tenth of the
// process's in the steady state; the coverage says by how much.
//
// Labels: node, pid, device (the CUDA ordinal in the process), gpu (NVML's
// index) and uuid where the lane's GPU is certain, namespace/pod/container
// in Kubernetes. Certain means: the process's library said the device's
// UUID (GF_GPU_DEVICE) and NVML lists a GPU of that UUID; or else NVML
// lists the process on exactly one GPU and it has one lane. Otherwise not
// said: CUDA_VISIBLE_DEVICES renumbers, so an ordinal says nothing of
// NVML's index.
//
// The verdict's step 3 (memory bound or not) needs the driver's figures of
// the lane's GPU over the same stretch (JoinLaneDevice): only where that GPU
// is certain by the rule above, and the stretch is on CLOCK_MONOTONIC (a clock
// pair of the process), the sampler's readings in it are passed to report.h's
// Judge, record's own rule. The figures joined are gauges of the lane too:
// SM activity (source="gpm", or NVML's classic utilisation, source="classic",
// on a GPU without GPM) and GPM's DRAM bandwidth. A lane judged but not joined
// is counted by why (gpuflame_gpu_lane_device_not_joined_total{reason}), its
// step 3 not judged: a GPU is never guessed.
//
// Cardinality: at most kMaxLanes lanes, live and ended, 20 series each
// (5,120 in all), and one not-joined series per reason (6); past the cap,
// lanes are counted (gpuflame_gpu_lane_omitted_total), not exported. An
// ended process's lanes
// keep their last figures for kKeepNs (10 minutes: many 15 s scrapes see a
// short job), the ones ended longest ago dropped first when full (counted).
// Event loop only.
#ifndef GPUFLAME_AGENT_GPU_UTILIZATION_H_
#define GPUFLAME_AGENT_GPU_UTILIZATION_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/metrics_server.h"
#include "profiler/devices/gpu_reader.h"
#include "profiler/process/k8s_metadata.h"
#include "profiler/utilization/report.h"
#include "profiler/utilization/utilization.h"

namespace gpuflame::profiler {

// What the driver said of a lane's GPU over the stretch one window judged.
struct LaneDevice {
  std::optional<GpuIdentity> gpu;                 // where NVML makes it certain
  std::optional<utilization::DeviceStats> stats;  // its readings in the stretch; nullopt: not joined
  const char* not_joined = nullptr;               // why not, a label value (stats unset only)
};

// NVML's GPU of UUID |uuid| where it is not empty; else the one GPU NVML
// lists |pid| on, where exactly one.
using GpuOf = std::function<std::optional<GpuIdentity>(pid_t pid, const std::string& uuid)>;
// An NVML GPU's figures over [from, to) on CLOCK_MONOTONIC (GpuSampler::Over).
using DeviceOver = std::function<utilization::DeviceStats(uint32_t index, uint64_t from_mono_ns, uint64_t to_mono_ns)>;

// The join rule: |lanes| is how many lanes |lane|'s process has this window;
// |gpu_of| or |over| null: NVML is not read. Reasons: "no_nvml",
// "uuid_unlisted" (the library said the lane's UUID, NVML lists no GPU of
// it, as for a MIG instance, and its process lists do not settle it
// either), and without a UUID "several_lanes" (which lane is which GPU is
// not known) and "gpu_unknown" (NVML lists the process on no GPU or
// several); then "no_clock" (no clock pair to put the stretch on the
// sampler's clock), "no_readings" (none in the stretch).
LaneDevice JoinLaneDevice(const utilization::JudgedLane& lane, size_t lanes, const GpuOf& gpu_of,
                          const DeviceOver& over);

class GpuUtilizationMetrics {
 public:
  static constexpr size_t kMaxLanes = 256;
  static constexpr uint64_t kKeepNs = 600'000'000'000ull;  // 10 minutes

  // A lane's pod (null: not in the registry any more) and its NVML GPU and
  // figures over the lane's judged stretch (JoinLaneDevice).
  using PodOf = std::function<const PodInfo*(pid_t)>;
  using DeviceOf = std::function<LaneDevice(const utilization::JudgedLane&)>;

  // One window's judgements (Utilization::JudgeWindows), at CLOCK_MONOTONIC |now_ns|.
  void Update(const std::vector<utilization::JudgedLane>& judged, const PodOf& pod_of, const DeviceOf& device_of,
              uint64_t now_ns);
  std::vector<Metric> Metrics(const std::string& node) const;

  size_t size() const { return lanes_.size(); }
  uint64_t omitted() const { return omitted_; }
  uint64_t ended_dropped() const { return ended_dropped_; }
  const std::map<std::string, uint64_t>& not_joined() const { return not_joined_; }

 private:
  struct Lane {
    // Labels.
    std::string gpu, uuid;
    PodInfo pod;
    // The last window that observed it.
    double busy = 0, idle_gap = 0, coverage = 0, tiny = 0;
    uint64_t p50_ns = 0, p95_ns = 0, max_ns = 0;
    utilization::Verdict verdict = utilization::Verdict::kNotJudged;
    bool judged_once = false;
    // The driver's figures joined to that window (-1: not given).
    double device_sm = -1, device_dram = -1;
    const char* sm_source = "";  // "gpm" or "classic"

    // Totals.
    uint64_t observed_ns = 0, busy_ns = 0, gap_ns = 0, gaps = 0, kernels = 0, sync_ns = 0;
    std::array<uint64_t, utilization::kCopyDirections> copy_bytes{};
    uint64_t ended_ns = 0;  // 0: live
    uint64_t order = 0;     // first seen
  };
  std::map<std::pair<pid_t, uint32_t>, Lane> lanes_;
  uint64_t next_order_ = 0;
  uint64_t omitted_ = 0;        // judgements of lanes not kept (past kMaxLanes), one per lane and window
  uint64_t ended_dropped_ = 0;  // ended lanes dropped before kKeepNs
  std::map<std::string, uint64_t> not_joined_;  // judged windows without the driver's figures, by why
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_GPU_UTILIZATION_H_
