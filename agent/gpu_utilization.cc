#include "agent/gpu_utilization.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

LaneDevice JoinLaneDevice(const utilization::JudgedLane& lane, size_t lanes, const GpuOf& gpu_of,
                          const DeviceOver& over) {
  LaneDevice d;
  if (!gpu_of || !over) {
    d.not_joined = "no_nvml";
    return d;
  }
  // The driver's name of the device: certain, however many lanes.
  if (!lane.uuid.empty()) d.gpu = gpu_of(lane.pid, lane.uuid);
  if (!d.gpu) {
    // Else named only where it cannot be another: one lane, one GPU in
    // NVML's lists. CUDA_VISIBLE_DEVICES renumbers, so a process's ordinal
    // says nothing of NVML's index, and two lanes on two GPUs cannot be
    // told apart. (A UUID NVML does not list, a MIG instance's, falls back
    // to this too: NVML lists its processes on the parent GPU.)
    const char* why = lane.uuid.empty() ? nullptr : "uuid_unlisted";
    if (lanes != 1) {
      d.not_joined = why ? why : "several_lanes";
      return d;
    }
    d.gpu = gpu_of(lane.pid, "");
    if (!d.gpu) {
      d.not_joined = why ? why : "gpu_unknown";
      return d;
    }
  }
  if (!lane.from_mono_ns || !lane.to_mono_ns) {
    d.not_joined = "no_clock";
    return d;
  }
  utilization::DeviceStats s = over(d.gpu->index, *lane.from_mono_ns, *lane.to_mono_ns);
  if (s.readings == 0) {
    d.not_joined = "no_readings";
    return d;
  }
  d.stats = std::move(s);
  return d;
}

void GpuUtilizationMetrics::Update(const std::vector<utilization::JudgedLane>& judged, const PodOf& pod_of,
                                   const DeviceOf& device_of, uint64_t now_ns) {
  // Ended lanes past their time go first, so that new ones find room.
  std::erase_if(lanes_, [&](const auto& e) { return e.second.ended_ns && e.second.ended_ns + kKeepNs <= now_ns; });
  for (const utilization::JudgedLane& j : judged) {
    const auto key = std::pair{j.pid, j.device};
    auto it = lanes_.find(key);
    if (it == lanes_.end()) {
      if (lanes_.size() >= kMaxLanes) {
        // Room from the lane ended longest ago; live lanes are never pushed out.
        auto oldest = lanes_.end();
        for (auto e = lanes_.begin(); e != lanes_.end(); ++e)
          if (e->second.ended_ns && (oldest == lanes_.end() || e->second.ended_ns < oldest->second.ended_ns))
            oldest = e;
        if (oldest == lanes_.end()) {
          omitted_++;
          continue;
        }
        lanes_.erase(oldest);
        ended_dropped_++;
      }
      it = lanes_.emplace(key, Lane{}).first;
      it->second.order = next_order_++;
    }
    Lane& l = it->second;
    if (const PodInfo* pod = pod_of(j.pid)) l.pod = *pod;
    const LaneDevice device = device_of(j);
    if (device.gpu) {
      l.gpu = absl::StrCat(device.gpu->index);
      l.uuid = device.gpu->uuid;
    }
    const utilization::LaneJudgement& w = j.judgement;
    const utilization::PartStats& f = w.figures;
    l.observed_ns += w.observed_ns;
    l.busy_ns += f.busy_ns;
    l.gap_ns += f.gap_ns;
    l.gaps += f.gaps;
    l.kernels += f.kernels;
    l.sync_ns += w.sync_ns;
    for (size_t d = 0; d < l.copy_bytes.size(); d++) l.copy_bytes[d] += f.copies[d].bytes;
    if (j.ended) l.ended_ns = now_ns;
    if (w.observed_ns == 0) continue;  // nothing seen: the last figures stand
    l.judged_once = true;
    l.busy = utilization::Ratio(f.busy_ns, w.observed_ns);
    l.idle_gap = std::min(1.0, utilization::Ratio(f.gap_ns, w.observed_ns));
    l.coverage = w.coverage();
    l.tiny = utilization::Ratio(f.short_kernels, f.kernels);
    l.p50_ns = f.kernel_durations.Quantile(0.50);
    l.p95_ns = f.kernel_durations.Quantile(0.95);
    l.max_ns = f.kernel_durations.max_ns();
    // record's rule (report.h), with the driver's figures of the same stretch.
    const utilization::DeviceStats* stats = device.stats ? &*device.stats : nullptr;
    if (!stats) not_joined_[device.not_joined ? device.not_joined : "no_nvml"]++;
    utilization::LaneReport r;
    r.steady = f;
    r.gap_threshold_ns = 0;
    utilization::Judge(r, 0, stats,
                       absl::StrCat("its GPU's figures were not joined: ", device.not_joined ? device.not_joined : ""));
    l.verdict = r.verdict;
    l.device_sm = l.device_dram = -1;
    l.sm_source = "";
    if (stats && stats->gpm_sm.n) {
      l.device_sm = stats->gpm_sm.mean() / 100;
      l.sm_source = "gpm";
    } else if (stats && stats->util_gpu.n) {
      l.device_sm = stats->util_gpu.mean() / 100;
      l.sm_source = "classic";
    }
    if (stats && stats->gpm_dram.n) l.device_dram = stats->gpm_dram.mean() / 100;
  }
}

std::vector<Metric> GpuUtilizationMetrics::Metrics(const std::string& node) const {
  std::vector<Metric> out;
  auto labels = [&](const std::pair<pid_t, uint32_t>& key, const Lane& l) {
    Metric::Labels m;
    if (!node.empty()) m.emplace_back("node", node);
    m.emplace_back("pid", absl::StrCat(key.first));
    m.emplace_back("device", absl::StrCat(key.second));
    if (!l.gpu.empty()) m.emplace_back("gpu", l.gpu);
    if (!l.uuid.empty()) m.emplace_back("uuid", l.uuid);
    if (l.pod.in_kubernetes()) {
      m.emplace_back("namespace", l.pod.namespace_name);
      m.emplace_back("pod", l.pod.pod);
      m.emplace_back("container", l.pod.container);
    }
    return m;
  };
  // One family at a time: the exposition format wants a family's series together.
  struct Family {
    const char* name;
    const char* help;
    const char* type;
    std::function<double(const Lane&)> value;
    bool judged_only;  // a gauge of the last window that observed the lane
  };
  const Family families[] = {
      {"gpuflame_gpu_lane_busy_ratio",
       "Share of the observed time the process's GPU ran its kernels, copies or memsets (CUPTI, last window that "
       "observed it).",
       "gauge", [](const Lane& l) { return l.busy; }, true},
      {"gpuflame_gpu_lane_idle_gap_ratio",
       "Share of the observed time in idle gaps of the gap threshold (5 ms) or longer (CUPTI, last window that "
       "observed it).",
       "gauge", [](const Lane& l) { return l.idle_gap; }, true},
      {"gpuflame_gpu_lane_coverage_ratio",
       "Share of the window in which CUPTI activity was on and judged (duty-cycled; the rest is neither busy nor "
       "idle).",
       "gauge", [](const Lane& l) { return l.coverage; }, true},
      {"gpuflame_gpu_lane_short_kernel_ratio", "Share of the window's kernels that ran under 10 us.", "gauge",
       [](const Lane& l) { return l.tiny; }, true},
      {"gpuflame_gpu_lane_kernel_p50_seconds", "Median kernel duration in the last window that observed it.", "gauge",
       [](const Lane& l) { return static_cast<double>(l.p50_ns) / 1e9; }, true},
      {"gpuflame_gpu_lane_kernel_p95_seconds",
       "95th percentile of kernel duration in the last window that observed it.", "gauge",
       [](const Lane& l) { return static_cast<double>(l.p95_ns) / 1e9; }, true},
      {"gpuflame_gpu_lane_kernel_max_seconds", "Longest kernel in the last window that observed it.", "gauge",
       [](const Lane& l) { return static_cast<double>(l.max_ns) / 1e9; }, true},
      {"gpuflame_gpu_lane_observed_seconds_total", "GPU time observed (CUPTI activity on and judged).", "counter",
       [](const Lane& l) { return static_cast<double>(l.observed_ns) / 1e9; }, false},
      {"gpuflame_gpu_lane_busy_seconds_total", "Observed time the GPU ran the process's work.", "counter",
       [](const Lane& l) { return static_cast<double>(l.busy_ns) / 1e9; }, false},
      {"gpuflame_gpu_lane_idle_gap_seconds_total", "Observed time in idle gaps of the gap threshold or longer.",
       "counter", [](const Lane& l) { return static_cast<double>(l.gap_ns) / 1e9; }, false},
      {"gpuflame_gpu_lane_idle_gaps_total", "Idle gaps of the gap threshold or longer observed.", "counter",
       [](const Lane& l) { return static_cast<double>(l.gaps); }, false},
      {"gpuflame_gpu_lane_kernels_total", "Kernels observed (not scaled by the duty cycle).", "counter",
       [](const Lane& l) { return static_cast<double>(l.kernels); }, false},
      {"gpuflame_gpu_lane_sync_wait_seconds_total",
       "Time the process's threads waited in CUDA synchronise calls (CUPTI's synchronisation records or the probes, "
       "where on).",
       "counter", [](const Lane& l) { return static_cast<double>(l.sync_ns) / 1e9; }, false},
  };
  for (const Family& f : families)
    for (const auto& [key, l] : lanes_)
      if (!f.judged_only || l.judged_once) out.emplace_back(f.name, f.help, f.type, f.value(l), labels(key, l));
  for (size_t d = 0; d < utilization::kCopyDirections; d++)
    for (const auto& [key, l] : lanes_) {
      Metric::Labels m = labels(key, l);
      m.emplace_back("direction", utilization::DirectionName(static_cast<utilization::CopyDirection>(d)));
      out.emplace_back("gpuflame_gpu_lane_copy_bytes_total", "Bytes copied by the process's observed copies.",
                       "counter", static_cast<double>(l.copy_bytes[d]), std::move(m));
    }
  for (const auto& [key, l] : lanes_) {
    if (l.device_sm < 0) continue;
    Metric::Labels m = labels(key, l);
    m.emplace_back("source", l.sm_source);
    out.emplace_back("gpuflame_gpu_lane_device_sm_ratio",
                     "The lane's GPU, all its processes, over the stretch of the last window that observed the lane: "
                     "SMs active (NVML GPM, source=gpm) or the classic utilisation (source=classic, no GPM).",
                     "gauge", l.device_sm, std::move(m));
  }
  for (const auto& [key, l] : lanes_) {
    if (l.device_dram < 0) continue;
    Metric::Labels m = labels(key, l);
    m.emplace_back("source", "gpm");
    out.emplace_back("gpuflame_gpu_lane_device_dram_bandwidth_ratio",
                     "The lane's GPU, all its processes, over the stretch of the last window that observed the lane: "
                     "DRAM bandwidth against its peak (NVML GPM); at 0.6 or more a busy lane is memory_bound.",
                     "gauge", l.device_dram, std::move(m));
  }
  for (const auto& [key, l] : lanes_) {
    if (!l.judged_once) continue;
    Metric::Labels m = labels(key, l);
    m.emplace_back("verdict", utilization::VerdictName(l.verdict));
    out.emplace_back("gpuflame_gpu_lane_verdict",
                     "The three-step verdict on the last window that observed the lane (1 on the series of the verdict "
                     "given: supply, launch_bound, slow_kernels, memory_bound, busy or not_judged).",
                     "gauge", 1.0, std::move(m));
  }
  out.emplace_back(
      "gpuflame_gpu_lane_omitted_total",
      "Window judgements of lanes (process, GPU) not exported past the cap of 256 lanes: one per lane and window.",
      "counter", static_cast<double>(omitted_));
  for (const auto& [why, n] : not_joined_)
    out.emplace_back("gpuflame_gpu_lane_device_not_joined_total",
                     "Lane windows judged without the driver's figures of their GPU (the verdict's step 3 not "
                     "judged), by why: no_nvml, uuid_unlisted, several_lanes, gpu_unknown, no_clock, no_readings.",
                     "counter", static_cast<double>(n), Metric::Labels{{"reason", why}});
  out.emplace_back("gpuflame_gpu_lane_ended_dropped_total",
                   "Ended lanes whose last figures were dropped before their 10 minutes, to make room.", "counter",
                   static_cast<double>(ended_dropped_));
  return out;
}

}  // namespace gpuflame::profiler
