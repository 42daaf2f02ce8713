#include "agent/agent_command.h"

#include <signal.h>
#include <time.h>

#include <cctype>
#include <cstdio>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_writer.h"
#include "exporters/pprof/profile_limits.h"
#include "exporters/pyroscope/push_queue.h"
#include "exporters/pyroscope/pyroscope_grpc_client.h"
#include "profiler/process/k8s_metadata.h"
#include "agent/metrics_server.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/process/run_control.h"
#include "profiler/pipeline/session.h"
#include "profiler/aggregate/window.h"

namespace gpuflame::profiler {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Kubernetes label keys (app.kubernetes.io/name) as Pyroscope label names.
std::string LabelName(const std::string& key) {
  std::string out;
  for (char c : key) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out.substr(0, 1024);
}

// Pyroscope label values are at most 2048 bytes.
std::string LabelValue(std::string v) {
  if (v.size() > 2048) v.resize(2048);
  return v;
}

class Agent {
 public:
  Agent(const AgentConfig& cfg, Session& session)
      : cfg_(cfg), session_(session), client_(cfg.pyroscope), kubelet_(cfg.kubelet) {
    if (cfg.protocol == "grpc") grpc_client_ = std::make_unique<exporters::PyroscopeGrpcClient>(cfg.pyroscope);
    if (cfg.protocol == "ingest") client_.set_legacy_ingest(true);
  }

  absl::Status StartDelivery() {
    exporters::PushQueueOptions opt;
    opt.max_requests = cfg_.queue_requests;
    opt.spool_dir = cfg_.spool_dir;
    opt.spool_max_bytes = cfg_.spool_max_bytes;
    auto q = exporters::PushQueue::Create(
        [this](const std::string& body) {
          return grpc_client_ ? grpc_client_->PushEncoded(body) : client_.PushEncoded(body);
        },
        opt);
    if (!q.ok()) return q.status();
    queue_ = std::move(*q);
    return absl::OkStatus();
  }

  absl::Status StartMetrics() {
    if (cfg_.metrics_port == 0) return absl::OkStatus();
    return metrics_.Start(cfg_.metrics_address, cfg_.metrics_port);
  }

  void CloseWindow(int64_t start_wall, int64_t duration) {
    // Frames captured as raw addresses get another chance every window.
    session_.RefreshFrames();
    EventProcessor& events = session_.events();
    events.joiner().Flush(NowNs(CLOCK_MONOTONIC));  // unsampled kernels charged before the cut
    if (cfg_.kernel_time) session_.registry().CheckKernelTime();
    std::vector<StackCounters> counters = window_.Close(events.tracker().counters());
    auto cpu = events.cpu().TakeWindow();
    auto kernels = events.kernels().TakeWindow();
    absl::flat_hash_set<pid_t> active;
    for (StackId id = 0; id < counters.size() && id < events.stacks().size(); id++) {
      const StackCounters& c = counters[id];
      if (c.alloc_objects != 0 || c.inuse_objects != 0) active.insert(events.stacks().Get(id).pid);
    }
    for (const auto* window : {&cpu, &kernels})
      for (const auto& [key, c] : *window) active.insert(events.stacks().Get(key.stack).pid);
    absl::flat_hash_map<pid_t, std::string> comm;
    for (const auto& [pid, info] : session_.registry().processes()) comm[pid] = info->comm;
    for (pid_t pid : active) {
      const PodInfo& pod = Pod(pid);
      std::string name = comm.contains(pid) ? comm[pid] : "";
      if (!Selected(pid, name, pod)) continue;
      std::vector<exporters::Series> request;
      std::vector<profiler::Profile> profiles;
      for (uint8_t domain : {uint8_t{GF_DOMAIN_GPU}, uint8_t{GF_DOMAIN_TORCH}})
        profiles.push_back(BuildMemoryProfile(events.stack_source(), counters, domain, comm, pid, start_wall, duration));
      profiles.push_back(BuildTimeProfile(events.stack_source(), events.cpu(), events.cpu_period_ns(), cpu, TimeKind::kCpu, comm, pid, start_wall, duration));
      profiles.push_back(
          BuildTimeProfile(events.stack_source(), events.kernels(), events.cpu_period_ns(), kernels, TimeKind::kGpuKernel, comm, pid, start_wall, duration));
      for (profiler::Profile& p : profiles) {
        if (p.samples.empty()) continue;
        // One series per process already: the pid/process sample labels
        // would only split it again (and count against the label limit).
        for (auto& s : p.samples)
          std::erase_if(s.labels, [](const profiler::Label& l) { return l.key == "pid" || l.key == "process"; });
        exporters::LimitReport r = exporters::EnforceLimits(p);
        folded_samples_ += r.folded_samples;
        truncated_stacks_ += r.truncated_stacks;
        auto gz = exporters::EncodePprofGz(p);
        if (!gz.ok()) continue;
        request.push_back({Labels(p.name, pid, name, pod), std::move(*gz)});
      }
      if (!request.empty()) {
        queue_->Enqueue(request);
        windows_enqueued_++;
      }
    }
    // Exited processes have had their last window: forget them, so that a
    // new process reusing a pid is reported afresh.
    std::vector<pid_t> exited;
    for (const auto& [pid, info] : session_.registry().processes())
      if (info->exited) exited.push_back(pid);
    for (pid_t pid : exited) {
      session_.events().RetireProcess(pid);
      session_.registry().Forget(pid);
    }
  }

  void PublishMetrics() {
    if (cfg_.metrics_port == 0) return;
    auto bpf = session_.BpfStats();
    const EventProcessor& ev = session_.events();
    exporters::PushStats push = queue_->Stats();
    size_t attached = 0;
    for (const auto& [pid, info] : session_.registry().processes()) attached += !info->exited;
    metrics_.Publish({
        {"gpuflame_events_total", "Allocator events seen by the BPF programs.", "counter", double(bpf[GF_STAT_EVENTS])},
        {"gpuflame_ringbuf_dropped_total", "Events lost because the ring buffer was full.", "counter", double(bpf[GF_STAT_RINGBUF_FULL])},
        {"gpuflame_records_total", "Ring-buffer records handled in user space.", "counter", double(ev.stats().records)},
        {"gpuflame_records_malformed_total", "Ring-buffer records that failed validation.", "counter", double(ev.stats().malformed)},
        {"gpuflame_processes_attached", "Processes being profiled.", "gauge", double(attached)},
        {"gpuflame_library_files_attached", "Library files (CUDA, PyTorch, libpython) with probes attached.", "gauge", double(session_.registry().attached_files())},
        {"gpuflame_live_allocations", "Allocations currently tracked.", "gauge", double(ev.tracker().live_count())},
        {"gpuflame_unmatched_frees_total", "Frees of memory allocated before gpuflame attached.", "counter", double(ev.tracker().stats().unmatched_frees)},
        {"gpuflame_python_frames_unresolved_total", "Python frames whose code object could not be read.", "counter", double(session_.resolver().stats().python_unresolved)},
        {"gpuflame_cpu_samples_total", "CPU-time samples taken in profiled processes.", "counter", double(bpf[GF_STAT_CPU_SAMPLES])},
        {"gpuflame_kernel_launch_stacks_total", "Kernel launches whose stack was taken (sampled by the injection library).", "counter", double(ev.joiner().stats().launches)},
        {"gpuflame_gpu_activity_records_total", "Kernel, memcpy and memset records from libgpuflame_cupti.so.", "counter", double(ev.joiner().stats().records)},
        {"gpuflame_gpu_activity_charged_by_share_total", "GPU activity whose launch stack was not sampled, charged to the sampled stacks of the same kernel.", "counter", double(ev.joiner().stats().scaled)},
        {"gpuflame_gpu_activity_unattributed_total", "GPU activity charged to [launch stack not sampled] (its kernel never had a sampled launch).", "counter", double(ev.joiner().stats().unattributed)},
        {"gpuflame_gpu_activity_batches_unreadable_total", "Activity batches the probe could not copy (records lost).", "counter", double(bpf[GF_STAT_KERNEL_BATCH_READ_FAILED])},
        {"gpuflame_native_frames_unresolved", "Native frames still raw addresses (no symbol found yet).", "gauge", double(ev.frames().unresolved().size())},
        {"gpuflame_native_frames_resolved_later_total", "Raw-address frames named in a later window (debug files or binaries found by build ID).", "counter", double(session_.refresher().stats().resolved)},
        {"gpuflame_unwinds_total", "Native stacks unwound from copied user stacks.", "counter", double(session_.unwinder().stats().unwinds)},
        {"gpuflame_unwinds_libdwfl_total", "Unwinds that needed libdwfl (rules outside the cached CFI subset).", "counter", double(session_.unwinder().stats().fallback)},
        {"gpuflame_profiles_enqueued_total", "Per-process window pushes queued.", "counter", double(windows_enqueued_)},
        {"gpuflame_profiles_pushed_total", "Push requests accepted by Pyroscope.", "counter", double(push.pushed)},
        {"gpuflame_push_failures_total", "Push attempts that failed and were retried.", "counter", double(push.failed_attempts)},
        {"gpuflame_push_dropped_queue_full_total", "Push requests dropped because the queue was full.", "counter", double(push.dropped_queue_full)},
        {"gpuflame_push_rejected_total", "Push requests Pyroscope rejected for good.", "counter", double(push.dropped_rejected)},
        {"gpuflame_push_queue_requests", "Push requests waiting in memory.", "gauge", double(push.queued)},
        {"gpuflame_spool_requests", "Push requests waiting on disk.", "gauge", double(push.spooled)},
        {"gpuflame_spool_bytes", "Bytes of push requests waiting on disk.", "gauge", double(push.spool_bytes)},
        {"gpuflame_spool_dropped_total", "Spooled requests dropped because the spool was full.", "counter", double(push.dropped_spool_full)},
        {"gpuflame_spool_corrupt_total", "Spool files that could not be read back.", "counter", double(push.spool_corrupt)},
        {"gpuflame_profile_samples_folded_total", "Stacks folded into [other] to stay within Pyroscope's limits.", "counter", double(folded_samples_)},
    });
  }

  exporters::PushQueue& queue() { return *queue_; }
  void StopDelivery() { queue_.reset(); }
  int metrics_port() const { return metrics_.port(); }

 private:
  const PodInfo& Pod(pid_t pid) {
    if (const ProcessInfo* info = session_.registry().Find(pid)) return info->pod;
    static const PodInfo kNone;
    return kNone;
  }

  bool Selected(pid_t pid, const std::string& name, const PodInfo& pod) const {
    const Selectors& s = cfg_.select;
    if (s.Empty()) return true;
    if (std::find(s.pids.begin(), s.pids.end(), pid) != s.pids.end()) return true;
    if (Contains(s.processes, name)) return true;
    if (!pod.namespace_name.empty() && Contains(s.namespaces, pod.namespace_name)) return true;
    if (!pod.pod.empty() && Contains(s.pods, pod.pod)) return true;
    return false;
  }

  std::vector<std::pair<std::string, std::string>> Labels(const std::string& profile, pid_t pid,
                                                          const std::string& name, const PodInfo& pod) {
    std::string service = cfg_.service_name;
    if (service.empty())
      service = pod.in_kubernetes() && !pod.namespace_name.empty()
                    ? absl::StrCat(pod.namespace_name, "/", pod.container.empty() ? name : pod.container)
                    : name;
    if (service.empty()) service = "unknown_service";
    std::vector<std::pair<std::string, std::string>> l = {
        {"__name__", profile},
        {"service_name", LabelValue(service)},
        {"node", LabelValue(cfg_.node)},
        {"pid", std::to_string(pid)},
        {"process", LabelValue(name)},
    };
    if (!pod.namespace_name.empty()) l.push_back({"namespace", LabelValue(pod.namespace_name)});
    if (!pod.pod.empty()) l.push_back({"pod", LabelValue(pod.pod)});
    if (!pod.container.empty()) l.push_back({"container", LabelValue(pod.container)});
    if (!pod.container_id.empty()) l.push_back({"container_id", pod.container_id.substr(0, 12)});
    for (const auto& [key, value] : kubelet_.LabelsOf(pod.pod_uid)) {
      if (l.size() >= 30) break;  // Pyroscope's per-series label limit
      l.push_back({LabelName(key), LabelValue(value)});
    }
    return l;
  }

  const AgentConfig& cfg_;
  Session& session_;
  exporters::PyroscopeClient client_;
  std::unique_ptr<exporters::PyroscopeGrpcClient> grpc_client_;
  std::unique_ptr<exporters::PushQueue> queue_;
  KubeletPods kubelet_;
  MetricsServer metrics_;
  WindowAccumulator window_;
  uint64_t windows_enqueued_ = 0;
  uint64_t folded_samples_ = 0;
  uint64_t truncated_stacks_ = 0;
};

}  // namespace

int RunAgent(const AgentConfig& cfg) {
  Session::Options sopt;
  sopt.system_wide = true;
  sopt.show_trampolines = cfg.show_trampolines;
  sopt.native_stacks = cfg.native_stacks;
  sopt.cpu_hz = cfg.cpu_hz;
  sopt.thread_names = cfg.thread_names;
  sopt.binary_dirs = cfg.binary_dirs;
  auto started = Session::Start(sopt);
  if (!started.ok()) {
    std::fprintf(stderr, "gpuflame: %s\n", std::string(started.status().message()).c_str());
    return 2;
  }
  Session& session = **started;
  Agent agent(cfg, session);
  if (auto s = agent.StartDelivery(); !s.ok()) {
    std::fprintf(stderr, "gpuflame: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (auto s = agent.StartMetrics(); !s.ok()) {
    std::fprintf(stderr, "gpuflame: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  InstallStopHandlers(/*sigint=*/true);
  std::fprintf(stderr, "gpuflame: agent pushing to %s every %gs%s\n", cfg.pyroscope.url.c_str(),
               cfg.window_seconds,
               cfg.metrics_port ? absl::StrCat(", metrics on :", agent.metrics_port()).c_str() : "");

  const auto window_ns = static_cast<int64_t>(cfg.window_seconds * 1e9);
  int64_t window_start = NowNs(CLOCK_MONOTONIC);
  int64_t window_start_wall = NowNs(CLOCK_REALTIME);
  int64_t last_metrics = 0;
  while (!StopRequested()) {
    session.Poll(20);
    for (const std::string& w : session.TakeWarnings()) std::fprintf(stderr, "gpuflame: warning: %s\n", w.c_str());
    int64_t now = NowNs(CLOCK_MONOTONIC);
    if (now - window_start >= window_ns) {
      agent.CloseWindow(window_start_wall, now - window_start);
      window_start = now;
      window_start_wall = NowNs(CLOCK_REALTIME);
    }
    if (now - last_metrics > 1'000'000'000) {
      agent.PublishMetrics();
      last_metrics = now;
    }
  }
  // The last, partial window goes out too.
  session.Drain();
  agent.CloseWindow(window_start_wall, NowNs(CLOCK_MONOTONIC) - window_start);
  // With a spool, what Pyroscope cannot take now waits on disk: no need to
  // hold the node's shutdown for it.
  bool flushed = agent.queue().Flush(cfg.spool_dir.empty() ? 10000 : 2000);
  exporters::PushStats st = agent.queue().Stats();
  agent.StopDelivery();  // undelivered requests move to the spool
  std::fprintf(stderr, "gpuflame: agent stopped: %llu events from %zu processes; %llu pushes accepted, %llu retried, %llu dropped (queue full), %llu rejected%s\n",
               static_cast<unsigned long long>(session.events().stats().records),
               session.registry().processes().size(),
               static_cast<unsigned long long>(st.pushed), static_cast<unsigned long long>(st.failed_attempts),
               static_cast<unsigned long long>(st.dropped_queue_full), static_cast<unsigned long long>(st.dropped_rejected),
               flushed ? ""
                       : absl::StrCat("; ", st.queued + st.spooled, " not delivered yet (", st.last_error, ")",
                                      cfg.spool_dir.empty() ? "" : absl::StrCat(", kept in ", cfg.spool_dir))
                             .c_str());
  Session::DetachProbesInBackground();
  return 0;
}

}  // namespace gpuflame::profiler
