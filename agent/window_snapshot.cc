#include "agent/window_snapshot.h"

#include <time.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/selection.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/process/run_control.h"
#include "profiler/utilization/idle_profile.h"

namespace gpuflame::profiler {

std::vector<ProcessWindow> WindowSnapshotter::Close(Session& session, int64_t start_wall, int64_t duration) {
  // Frames captured as raw addresses get another chance every window.
  session.RefreshFrames();
  EventProcessor& events = session.events();
  events.joiner().Flush(NowNs(CLOCK_MONOTONIC));  // unsampled kernels charged before the cut
  if (cfg_.profiling.kernel_time)
    session.registry().CheckKernelTime(
        [&](pid_t pid) { return events.tracker().Peak(pid, GF_DOMAIN_GPU, PeakScope::kAllTime).bytes > 0; },
        NowNs(CLOCK_MONOTONIC));
  // Processes found running (a restarted agent): what they held already.
  session.AccountBeforeAttach();
  // Each stack's in use at its process's peak in this window; the next
  // window's peak starts from the live set at this cut.
  std::vector<StackCounters> counters = window_.Close(events.tracker().CountersWithPeaks(PeakScope::kWindow));
  auto cpu = events.cpu().TakeWindow();
  auto kernels = events.kernels().TakeWindow();
  absl::flat_hash_set<pid_t> active;
  for (StackId id = 0; id < counters.size() && id < events.stacks().size(); id++) {
    const StackCounters& c = counters[id];
    if (c.alloc_objects != 0 || c.inuse_objects != 0 || c.inuse_bytes != 0 || c.peak_bytes != 0 || c.unused_bytes != 0)
      active.insert(events.stacks().Get(id).pid);
  }
  for (const auto* window : {&cpu, &kernels})
    for (const auto& [key, c] : *window) active.insert(events.stacks().Get(key.stack).pid);
  absl::flat_hash_map<pid_t, std::string> comm;
  for (const auto& [pid, info] : session.registry().processes()) comm[pid] = info->comm;
  const uint64_t now_ns = static_cast<uint64_t>(NowNs(CLOCK_MONOTONIC));
  absl::flat_hash_map<pid_t, std::vector<Profile>> nccl =
      nccl_.Close(events.nccl(), events.stack_source(), comm, start_wall, duration, now_ns);
  for (const auto& [pid, profiles] : nccl) active.insert(pid);
  absl::flat_hash_map<pid_t, Profile> idle = JudgeUtilization(session, comm, start_wall, duration, now_ns);
  for (const auto& [pid, profile] : idle) active.insert(pid);

  std::vector<ProcessWindow> out;
  for (pid_t pid : active) {
    ProcessWindow w;
    w.pid = pid;
    if (const ProcessInfo* info = session.registry().Find(pid)) {
      w.pod = info->pod;
      w.service = info->service;
    }
    if (auto it = comm.find(pid); it != comm.end()) w.process = it->second;
    if (!Selected(cfg_.select, pid, w.process, w.pod)) continue;
    for (uint8_t domain : {uint8_t{GF_DOMAIN_GPU}, uint8_t{GF_DOMAIN_TORCH}}) {
      w.profiles.push_back(
          BuildMemoryProfile(events.stack_source(), counters, domain, comm, pid, start_wall, duration));
      const PeakSummary peak = events.tracker().Peak(pid, domain, PeakScope::kWindow);
      if (peak.bytes > 0)
        w.profiles.back().comments.push_back(absl::StrCat("gpuflame: ", DescribePeak(peak, PeakScope::kWindow)));
    }
    w.profiles.push_back(BuildTimeProfile(events.stack_source(), events.cpu(), events.cpu_period_ns(), cpu,
                                          TimeKind::kCpu, comm, pid, start_wall, duration));
    w.profiles.push_back(BuildTimeProfile(events.stack_source(), events.kernels(), events.cpu_period_ns(), kernels,
                                          TimeKind::kGpuKernel, comm, pid, start_wall, duration));
    if (auto it = nccl.find(pid); it != nccl.end()) {
      for (Profile& p : it->second) w.profiles.push_back(std::move(p));
      w.nccl_labels = NcclRankLabels(events.nccl(), pid);
    }
    if (auto it = idle.find(pid); it != idle.end()) w.profiles.push_back(std::move(it->second));
    // The profiles say when they were taken with something shed (Pyroscope
    // keeps no comments: /metrics' gpuflame_shedding and the log say it too).
    if (uint32_t shed = session.guardrails().actions(); shed != 0)
      for (Profile& p : w.profiles)
        p.comments.push_back(absl::StrCat("gpuflame was shedding ", DescribeShed(shed), " to stay in its budget"));
    if (reported_.insert(pid).second) processes_reported_++;
    out.push_back(std::move(w));
  }
  // The event loop is ours until we return: the next window's peak starts
  // from the live set at this cut.
  events.StartPeakWindow();
  return out;
}

absl::flat_hash_map<pid_t, Profile> WindowSnapshotter::JudgeUtilization(
    Session& session, const absl::flat_hash_map<pid_t, std::string>& comm, int64_t start_wall, int64_t duration,
    uint64_t now_ns) {
  absl::flat_hash_map<pid_t, Profile> out;
  if (!util_) return out;
  ProcessRegistry& registry = session.registry();
  utilization::IdleJoin join;
  std::vector<utilization::JudgedLane> judged = util_->JudgeWindows(
      [&registry](pid_t pid) {
        const ProcessInfo* info = registry.Find(pid);
        return !info || info->exited;
      },
      join);
  // Only the selected processes are reported; their pods as the registry has them.
  auto selected = [&](pid_t pid) {
    const ProcessInfo* info = registry.Find(pid);
    auto c = comm.find(pid);
    return Selected(cfg_.select, pid, c == comm.end() ? std::string() : c->second, info ? info->pod : PodInfo{});
  };
  std::erase_if(judged, [&](const utilization::JudgedLane& l) { return !selected(l.pid); });
  absl::flat_hash_map<pid_t, int> lanes_of;
  absl::flat_hash_map<pid_t, std::pair<uint64_t, uint64_t>> coverage;  // observed, wall
  for (const utilization::JudgedLane& l : judged) {
    lanes_of[l.pid]++;
    coverage[l.pid].first += l.judgement.observed_ns;
    coverage[l.pid].second += l.judgement.wall_ns();
  }
  if (util_metrics_)
    util_metrics_->Update(
        judged,
        [&registry](pid_t pid) -> const PodInfo* {
          const ProcessInfo* info = registry.Find(pid);
          return info ? &info->pod : nullptr;
        },
        [&](const utilization::JudgedLane& l) {
          return JoinLaneDevice(l, static_cast<size_t>(lanes_of[l.pid]), gpu_of_, over_);
        },
        now_ns);
  absl::flat_hash_map<pid_t, utilization::IdleJoin> by_pid;
  for (const auto& [charge, ns] : join.ns)
    if (coverage.contains(charge.pid)) by_pid[charge.pid].ns[charge] = ns;
  for (auto& [pid, j] : by_pid) {
    Profile p = utilization::BuildIdleProfile(session.events().stack_source(), j, comm, start_wall, duration);
    const auto [observed, wall] = coverage[pid];
    const double share = utilization::Ratio(observed, wall);
    // Idle time is what was observed, never scaled up: the coverage says
    // how much of the window that is (the duty cycle's 10% steady), on the
    // samples in 10% steps (a series label in Pyroscope: 11 values at most)
    // and exactly in a comment.
    const std::string step = absl::StrCat(static_cast<int>(share * 10 + 0.5) * 10, "%");
    for (Sample& s : p.samples) s.labels.push_back({"gpu_observed", step, 0});
    p.comments.push_back(absl::StrFormat(
        "gpuflame: CUPTI activity is duty-cycled in the agent: idle gaps were judged only while it was on, %.1f%% "
        "of this window (%.0f ms of %.0f ms), and are not scaled up",
        100 * share, static_cast<double>(observed) / 1e6, static_cast<double>(wall) / 1e6));
    out.emplace(pid, std::move(p));
  }
  return out;
}

}  // namespace gpuflame::profiler
