// The worker's part of closing an agent window: cut the window out of the
// pipeline's counters and build each selected process's profiles from it.
// That needs the pipeline's state (stacks, frames, trackers, the registry),
// so it runs on the event loop; the result is self-contained (frames are
// copied into each Profile), so everything after it (limits, encoding,
// labels, delivery) runs on the export thread (WindowExporter).
// Not thread-safe: event loop only.
#ifndef GPUFLAME_AGENT_WINDOW_SNAPSHOT_H_
#define GPUFLAME_AGENT_WINDOW_SNAPSHOT_H_

#include <sys/types.h>

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "agent/agent_config.h"
#include "agent/gpu_utilization.h"
#include "agent/nccl_window.h"
#include "agent/retirement.h"
#include "profiler/aggregate/profile.h"
#include "profiler/aggregate/window.h"
#include "profiler/pipeline/session.h"
#include "profiler/process/k8s_metadata.h"
#include "profiler/process/service_hints.h"
#include "profiler/utilization/utilization.h"

namespace gpuflame::profiler {

// One process's profiles for one window, with what its labels need.
struct ProcessWindow {
  pid_t pid = 0;
  std::string process;   // comm
  PodInfo pod;           // copied: the process may be forgotten before export
  ServiceHints service;  // likewise
  // gpu_memory, torch_memory, process_cpu, gpu_kernel (some may be empty),
  // where it called NCCL: nccl, nccl_hang, nccl_straggler; where a GPU of
  // it idled while CUPTI looked: gpu_idle.
  std::vector<Profile> profiles;
  // Series labels of its nccl and nccl_straggler profiles: its communicator
  // and rank (NcclRankLabels). nccl_hang's are its samples' own.
  std::vector<std::pair<std::string, std::string>> nccl_labels;
};

class WindowSnapshotter {
 public:
  explicit WindowSnapshotter(const AgentConfig& cfg) : cfg_(cfg) {}

  // Why the GPU idles (null: off, no kernel time): each close judges the
  // lanes (Utilization in windowed mode, fed by the pipeline), updates
  // |metrics| and adds each process's gpu_idle profile to its window.
  // |gpu_of| and |over| (null: NVML not read) join each lane's judged
  // stretch to its GPU's figures (JoinLaneDevice) for the verdict's step 3.
  void SetUtilization(utilization::Utilization* u, GpuUtilizationMetrics* metrics, GpuOf gpu_of, DeviceOver over) {
    util_ = u;
    util_metrics_ = metrics;
    gpu_of_ = std::move(gpu_of);
    over_ = std::move(over);
  }

  // Closes the window that began at |start_wall| and lasted |duration| ns:
  // the profiles of every selected process that had activity in it.
  std::vector<ProcessWindow> Close(Session& session, int64_t start_wall, int64_t duration);
  // Retired pids: a new process reusing one counts as another process.
  // Retired processes (after the window close that reported them last):
  // their ids of stacks start from zero again.
  void Forget(const Retired& retired) {
    for (pid_t pid : retired.pids) reported_.erase(pid);
    window_.Forget(retired.stacks);
    nccl_.ForgetStacks(retired.stacks);
  }
  // Processes that had at least one window (for the agent's stop line; the
  // registry forgets exited ones, so it cannot say).
  uint64_t processes_reported() const { return processes_reported_; }
  // NCCL hangs that ended since the last close (NcclWatch).
  void OnHangsEnded(std::span<const NcclHang> ended) { nccl_.OnHangsEnded(ended); }

 private:
  // The lanes' judgement and each process's gpu_idle profile.
  absl::flat_hash_map<pid_t, Profile> JudgeUtilization(Session& session,
                                                       const absl::flat_hash_map<pid_t, std::string>& comm,
                                                       int64_t start_wall, int64_t duration, uint64_t now_ns);

  const AgentConfig& cfg_;
  utilization::Utilization* util_ = nullptr;
  GpuUtilizationMetrics* util_metrics_ = nullptr;
  GpuOf gpu_of_;
  DeviceOver over_;
  WindowAccumulator window_;
  NcclWindow nccl_;
  absl::flat_hash_set<pid_t> reported_;  // live pids that had a window
  uint64_t processes_reported_ = 0;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_WINDOW_SNAPSHOT_H_
