#include "profiler/utilization/report.h"

#include "absl/strings/str_format.h"

namespace gpuflame::profiler::utilization {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kSupply: return "supply";
    case Verdict::kLaunchBound: return "launch_bound";
    case Verdict::kSlowKernels: return "slow_kernels";
    case Verdict::kMemoryBound: return "memory_bound";
    case Verdict::kBusy: return "busy";
    case Verdict::kNotJudged: break;
  }
  return "not_judged";
}

double Ratio(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void Judge(LaneReport& r, uint64_t sync_in_gaps_ns, const DeviceStats* gpu, const std::string& no_gpu) {
  r.sync_in_gaps_ns = sync_in_gaps_ns;
  const PartStats& s = r.steady;
  if (r.counts.weighted_records) {
    r.reason = "CUPTI activity was duty-cycled: its off periods cannot be told from idle time";
    return;
  }
  if (s.span_ns() < kMinJudgedNs) {
    r.reason = absl::StrFormat("%.0f ms of GPU run: too little to judge", static_cast<double>(s.span_ns()) / 1e6);
    return;
  }
  const double gap = Ratio(s.gap_ns, s.span_ns()), busy = Ratio(s.busy_ns, s.span_ns());
  const double tiny = Ratio(s.short_kernels, s.kernels);
  const uint64_t p50 = s.kernel_durations.Quantile(0.50), p95 = s.kernel_durations.Quantile(0.95);
  if (gap >= kSupplyGapRatio) {
    r.verdict = Verdict::kSupply;
    r.reason = absl::StrFormat(
        "idle gaps of %.0f ms or more are %.1f%% of the time (30%% or more): the GPU waits for its supply (data "
        "loading, host work, synchronisation); %.1f%% of the idle time a thread waited in a synchronise call; "
        "gpu_idle shows what the CPU did in the gaps",
        static_cast<double>(r.gap_threshold_ns) / 1e6, 100 * gap, 100 * Ratio(r.sync_in_gaps_ns, s.gap_ns));
  } else if (s.kernels && (busy < kLaunchBoundBusy || tiny >= kTinyKernelShare)) {
    r.verdict = Verdict::kLaunchBound;
    r.reason = absl::StrFormat(
        "the GPU was busy %.1f%% of the time with idle gaps only %.1f%%: it idles in short gaps between kernels, "
        "%.1f%% of which ran under 10 us (P50 %.1f us): launch overhead rules; fewer, larger kernels help "
        "(torch.compile, CUDA graphs)",
        100 * busy, 100 * gap, 100 * tiny, static_cast<double>(p50) / 1e3);
  } else if (!s.kernels && busy < kLaunchBoundBusy) {
    // Copies and memsets alone, and little of them (seen on the H200: an
    // agent's window that caught a data loader's host-to-device copies and
    // no kernel): neither starved by the gap rule nor busy.
    r.reason = absl::StrFormat(
        "the GPU was busy %.1f%% of the time with idle gaps %.1f%%, and ran no kernel in it (copies and memsets "
        "only): too little GPU work to judge",
        100 * busy, 100 * gap);
  } else if (s.kernels && p50 && static_cast<double>(p95) >= kSlowTailRatio * static_cast<double>(p50)) {
    r.verdict = Verdict::kSlowKernels;
    r.reason = absl::StrFormat(
        "the GPU was busy %.1f%%, and kernels' P95 (%.1f us) is %.0f times their P50 (%.1f us): a few slow kernels "
        "take the time; gpu_kernel shows which",
        100 * busy, static_cast<double>(p95) / 1e3, static_cast<double>(p95) / static_cast<double>(p50),
        static_cast<double>(p50) / 1e3);
  } else if (gpu && gpu->gpm_dram.n && gpu->gpm_dram.mean() >= kMemoryBoundDram) {
    r.verdict = Verdict::kMemoryBound;
    r.reason = absl::StrFormat(
        "the GPU was busy %.1f%% of the time with idle gaps %.1f%%, and DRAM bandwidth ran at %.0f%% of its peak "
        "(60%% or more; SMs active %.0f%%, tensor pipes %.0f%%, NVML GPM): the kernels wait on memory; fusing "
        "them (fewer round trips through DRAM) or a lower precision helps",
        100 * busy, 100 * gap, gpu->gpm_dram.mean(), gpu->gpm_sm.mean(), gpu->gpm_tensor.mean());
  } else {
    r.verdict = Verdict::kBusy;
    if (gpu && gpu->gpm_dram.n)
      r.reason = absl::StrFormat(
          "the GPU was busy %.1f%% of the time with idle gaps %.1f%%: it is not starved, and DRAM bandwidth ran at "
          "%.0f%% of its peak (under 60%%; SMs active %.0f%%, tensor pipes %.0f%%, NVML GPM): not memory bound",
          100 * busy, 100 * gap, gpu->gpm_dram.mean(), gpu->gpm_sm.mean(), gpu->gpm_tensor.mean());
    else
      r.reason = absl::StrFormat(
          "the GPU was busy %.1f%% of the time with idle gaps %.1f%%: it is not starved; whether it is memory bound "
          "(step 3) is not judged: it needs NVML's GPM figures of this GPU (%s)",
          100 * busy, 100 * gap, gpu ? "this GPU has no GPM figures" : no_gpu);
  }
}

LaneReport SteadyState(pid_t pid, uint32_t device, const BusyLane& lane) {
  LaneReport r;
  r.pid = pid;
  r.device = device;
  r.whole = lane.Whole();
  r.counts = lane.counts();
  r.pauses = lane.pauses().size();
  const std::vector<PartStats>& parts = lane.parts();
  // The first part busy at least half as long as the busiest is where the
  // steady state begins.
  uint64_t busiest = 0;
  for (const PartStats& p : parts) busiest = std::max(busiest, p.busy_ns);
  size_t first = 0;
  while (first < parts.size() && 2 * parts[first].busy_ns < busiest) first++;
  if (first == parts.size()) first = 0;
  for (size_t i = first; i < parts.size(); i++) {
    r.steady.Merge(parts[i]);
    if (i > first) {  // the pause before part i is idle time of the steady state
      const Gap& pause = lane.pauses()[i - 1];
      r.steady.gap_ns += pause.end_ns - pause.start_ns;
      r.steady.gaps++;
    }
  }
  if (first > 0) {
    r.start_up_ns = parts[first].start_ns - parts[0].start_ns;
    for (size_t i = 0; i < first; i++) r.start_up_busy_ns += parts[i].busy_ns;
    r.start_up_pauses = first;
  }
  r.steady_start_ns = parts.empty() ? 0 : parts[first].start_ns;
  r.gap_threshold_ns = lane.options().gap_ns;
  return r;
}

}  // namespace gpuflame::profiler::utilization
