#include "agent/window_snapshot.h"

#include <time.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "agent/selection.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/process/run_control.h"

namespace gpuflame::profiler {

std::vector<ProcessWindow> WindowSnapshotter::Close(Session& session, int64_t start_wall, int64_t duration) {
  // Frames captured as raw addresses get another chance every window.
  session.RefreshFrames();
  EventProcessor& events = session.events();
  events.joiner().Flush(NowNs(CLOCK_MONOTONIC));  // unsampled kernels charged before the cut
  if (cfg_.profiling.kernel_time) session.registry().CheckKernelTime();
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
      w.profiles.push_back(BuildMemoryProfile(events.stack_source(), counters, domain, comm, pid, start_wall, duration));
      const PeakSummary peak = events.tracker().Peak(pid, domain, PeakScope::kWindow);
      if (peak.bytes > 0) w.profiles.back().comments.push_back(absl::StrCat("gpuflame: ", DescribePeak(peak, PeakScope::kWindow)));
    }
    w.profiles.push_back(BuildTimeProfile(events.stack_source(), events.cpu(), events.cpu_period_ns(), cpu,
                                          TimeKind::kCpu, comm, pid, start_wall, duration));
    w.profiles.push_back(BuildTimeProfile(events.stack_source(), events.kernels(), events.cpu_period_ns(), kernels,
                                          TimeKind::kGpuKernel, comm, pid, start_wall, duration));
    if (auto it = nccl.find(pid); it != nccl.end()) {
      for (Profile& p : it->second) w.profiles.push_back(std::move(p));
      w.nccl_labels = NcclRankLabels(events.nccl(), pid);
    }
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

}  // namespace gpuflame::profiler
