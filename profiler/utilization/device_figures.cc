#include "profiler/utilization/device_figures.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler::utilization {

void DeviceFigures::Add(uint64_t mono_ns, std::vector<GpuReading> readings) {
  for (GpuReading& r : readings) {
    std::vector<Reading>& kept = readings_[r.index];
    if (kept.size() >= kMaxReadings) {
      dropped_++;
      continue;
    }
    kept.push_back({mono_ns, std::move(r)});
  }
}

void DeviceFigures::Trim(uint64_t mono_ns) {
  for (auto& [index, kept] : readings_) {
    auto first = std::find_if(kept.begin(), kept.end(), [&](const Reading& r) { return r.mono_ns >= mono_ns; });
    kept.erase(kept.begin(), first);
  }
}

void DeviceFigures::OnComputeProcess(uint32_t index, uint32_t pid) {
  auto it = seen_on_.find(pid);
  if (it == seen_on_.end() && seen_on_.size() >= kMaxPids) return;  // such a lane stays unjoined
  seen_on_[pid].insert(index);
}

DeviceStats DeviceFigures::Over(uint32_t index, uint64_t from_mono_ns, uint64_t to_mono_ns) const {
  DeviceStats s;
  auto it = readings_.find(index);
  if (it == readings_.end()) return s;
  for (const Reading& k : it->second) {
    if (k.mono_ns < from_mono_ns) continue;
    if (k.mono_ns >= to_mono_ns) continue;
    const GpuReading& r = k.reading;
    s.readings++;
    if (r.util_gpu) s.util_gpu.Add(*r.util_gpu);
    if (r.util_memory) s.util_memory.Add(*r.util_memory);
    if (r.gpm) {
      s.gpm_sm.Add(r.gpm->sm_util);
      s.gpm_occupancy.Add(r.gpm->sm_occupancy);
      s.gpm_tensor.Add(r.gpm->tensor_util);
      s.gpm_dram.Add(r.gpm->dram_bw_util);
    }
    if (r.memory_used) s.memory_used.Add(static_cast<double>(*r.memory_used));
    if (r.power_mw) s.power_w.Add(*r.power_mw / 1e3);
    if (r.temperature_c) s.temperature_c.Add(*r.temperature_c);
    if (r.sm_clock_mhz) s.sm_clock_mhz.Add(*r.sm_clock_mhz);
    if (r.memory_clock_mhz) s.memory_clock_mhz.Add(*r.memory_clock_mhz);
    for (const ProcessUtilization& p : r.processes) s.process_sm[p.pid].Add(p.sm_util);
  }
  return s;
}

const GpuIdentity* DeviceFigures::GpuWithUuid(const std::string& uuid) const {
  if (uuid.empty()) return nullptr;
  for (const GpuIdentity& g : gpus_)
    if (g.uuid == uuid) return &g;
  return nullptr;
}

std::optional<uint32_t> DeviceFigures::GpuOf(uint32_t pid, size_t lanes, const std::string& uuid,
                                             std::string* why) const {
  if (const GpuIdentity* g = GpuWithUuid(uuid)) return g->index;
  // Else (no UUID, or one NVML does not list: a MIG instance's, whose
  // processes NVML lists on the parent GPU) the process lists decide.
  const std::string unlisted =
      uuid.empty() ? "" : absl::StrCat("the CUDA device's UUID (", uuid, ") is not among NVML's GPUs, and ");
  if (gpus_.size() == 1) return gpus_[0].index;
  auto it = seen_on_.find(pid);
  if (it == seen_on_.end()) {
    *why = unlisted + "NVML never listed the process as a compute process";
    return std::nullopt;
  }
  if (it->second.size() == 1 && lanes == 1) return *it->second.begin();
  *why = absl::StrCat(unlisted, "the process used ", lanes, " CUDA devices and NVML listed it on ", it->second.size(),
                      " GPUs: which is which is not known");
  return std::nullopt;
}

}  // namespace gpuflame::profiler::utilization
