#include "agent/window_export.h"

#include <pthread.h>

#include <chrono>
#include <utility>

#include "agent/nccl_window.h"
#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_writer.h"
#include "exporters/pprof/profile_limits.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/utilization/idle_profile.h"

namespace gpuflame::profiler {

WindowExporter::WindowExporter(SeriesLabeler labeler, exporters::PushQueue& queue, size_t max_windows)
    : labeler_(std::move(labeler)), queue_(queue), max_windows_(max_windows < 1 ? 1 : max_windows) {
  thread_ = std::thread([this] { Run(); });
  pthread_setname_np(thread_.native_handle(), "gpuflame-export");  // as top -H shows it
}

WindowExporter::~WindowExporter() { Finish(); }

void WindowExporter::Submit(std::vector<ProcessWindow> window) {
  if (window.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.size() >= max_windows_) {
      dropped_.fetch_add(pending_.front().size(), std::memory_order_relaxed);
      pending_.pop_front();
    }
    pending_.push_back(std::move(window));
  }
  cv_.notify_one();
}

void WindowExporter::Finish() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finishing_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void WindowExporter::Run() {
  for (;;) {
    std::vector<ProcessWindow> window;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return finishing_ || !pending_.empty(); });
      if (pending_.empty()) return;  // finishing, and nothing left
      window = std::move(pending_.front());
      pending_.pop_front();
    }
    const auto start = std::chrono::steady_clock::now();
    Export(window);
    last_window_seconds_.store(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                               std::memory_order_relaxed);
  }
}

void WindowExporter::Export(std::vector<ProcessWindow>& window) {
  // The window's processes go out together, a few push requests rather than
  // one each (thousands under process churn overflowed the push queue), each
  // under kMaxRequestBytes of compressed profiles and kMaxRequestSeries: far
  // under Pyroscope's per-tenant ingestion burst (2 MB by default), whose
  // excess would be refused for good. A process's profiles stay together.
  std::vector<exporters::Series> batch;
  size_t batch_bytes = 0;
  auto flush = [&] {
    if (batch.empty()) return;
    queue_.Enqueue(batch);
    enqueued_.fetch_add(1, std::memory_order_relaxed);
    batch.clear();
    batch_bytes = 0;
  };
  for (ProcessWindow& w : window) {
    std::vector<exporters::Series> request;
    for (Profile& p : w.profiles) {
      if (p.samples.empty()) continue;
      // The series labels say whose profile it is: the pid/process sample
      // labels would only split it again, for Pyroscope turns string sample
      // labels into series labels (and count against the label limit).
      for (auto& s : p.samples)
        std::erase_if(s.labels, [](const Label& l) { return l.key == "pid" || l.key == "process"; });
      exporters::LimitReport r = exporters::EnforceLimits(p);
      folded_samples_.fetch_add(r.folded_samples, std::memory_order_relaxed);
      truncated_stacks_.fetch_add(r.truncated_stacks, std::memory_order_relaxed);
      auto gz = exporters::EncodePprofGz(p);
      if (!gz.ok()) {
        encode_failures_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      SeriesLabels labels = labeler_.Labels(p.name, w.pid, w.process, w.pod, w.service);
      // Communicator and rank: one pair per process (NcclRankLabels), so
      // no series beyond the process's own. A hang's are its samples', which
      // Pyroscope turns into series labels. Both within Pyroscope's 30
      // labels a series: the last pod labels give way.
      const bool ranked = p.name == kNcclProfile || p.name == kNcclStragglerProfile;
      // gpu_idle's samples carry phase and gpu_observed (the coverage, 11 values at most).
      const size_t room = ranked                                   ? w.nccl_labels.size()
                          : p.name == kNcclHangProfile             ? kNcclHangLabels
                          : p.name == utilization::kGpuIdleProfile ? 2
                                                                   : 0;
      while (room && labels.size() > 3 && labels.size() + room > kMaxSeriesLabels) labels.pop_back();
      if (ranked)
        for (const auto& [key, value] : w.nccl_labels) labels.emplace_back(key, LabelValue(value));
      request.push_back({std::move(labels), std::move(*gz)});
    }
    size_t bytes = 0;
    for (const exporters::Series& series : request) bytes += series.pprof.size();
    if (!batch.empty() && (batch_bytes + bytes > kMaxRequestBytes || batch.size() + request.size() > kMaxRequestSeries))
      flush();
    for (exporters::Series& series : request) batch.push_back(std::move(series));
    batch_bytes += bytes;
  }
  flush();
}

ExportStats WindowExporter::stats() const {
  ExportStats s;
  s.enqueued = enqueued_.load(std::memory_order_relaxed);
  s.folded_samples = folded_samples_.load(std::memory_order_relaxed);
  s.truncated_stacks = truncated_stacks_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.encode_failures = encode_failures_.load(std::memory_order_relaxed);
  s.last_window_seconds = last_window_seconds_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace gpuflame::profiler
