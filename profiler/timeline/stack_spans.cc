#include "profiler/timeline/stack_spans.h"

#include <algorithm>

namespace gpuflame::profiler::timeline {

void StackSpans::Close(uint64_t thread, Thread& t, size_t keep, uint64_t end_ns) {
  while (t.open.size() > keep) {
    const Open& o = t.open.back();
    emit_({thread, o.start_ns, std::max(end_ns, o.start_ns), o.frame.frame, static_cast<uint16_t>(t.open.size() - 1)});
    t.open.pop_back();
  }
}

bool StackSpans::EndedAfter(uint64_t thread, uint64_t ts_ns) {
  if (ended_.empty()) return false;
  auto it = ended_.find(thread);
  if (it == ended_.end()) return false;
  if (ts_ns < it->second) return true;
  ended_.erase(it);  // a later thread of the same ID (or the pid reused)
  return false;
}

void StackSpans::OnSample(uint64_t thread, uint64_t ts_ns, std::span<const SampledFrame> frames) {
  newest_ns_ = std::max(newest_ns_, ts_ns);
  if (!threads_.contains(thread) && EndedAfter(thread, ts_ns)) {
    after_end_++;
    return;
  }
  if (frames.size() > kMaxDepth) {
    truncated_++;
    frames = frames.first(kMaxDepth);
  }
  if (threads_.size() >= kMaxThreads && !threads_.contains(thread)) {
    absl::erase_if(threads_, [&](auto& kv) {
      Thread& t = kv.second;
      if (ts_ns <= t.last_ns || ts_ns - t.last_ns <= kGapPeriods * period_ns_) return false;
      Close(kv.first, t, 0, t.last_ns + period_ns_);
      return true;
    });
    if (threads_.size() >= kMaxThreads) {
      over_threads_++;
      return;
    }
  }
  auto [it, fresh] = threads_.try_emplace(thread);
  Thread& t = it->second;
  if (!fresh) {
    if (ts_ns < t.last_ns) {
      // Records of one thread can cross in the ring (CPUs reserve in
      // parallel): such a sample is taken at the thread's last time.
      reordered_++;
      ts_ns = t.last_ns;
    }
    if (ts_ns - t.last_ns > kGapPeriods * period_ns_) Close(thread, t, 0, t.last_ns + period_ns_);
  }
  size_t common = 0;
  while (common < t.open.size() && common < frames.size() && t.open[common].frame.identity == frames[common].identity)
    common++;
  Close(thread, t, common, ts_ns);
  for (size_t i = common; i < frames.size(); i++) t.open.push_back({frames[i], ts_ns});
  t.last_ns = ts_ns;
}

void StackSpans::OnExactStack(uint64_t thread, uint64_t ts_ns, std::span<const SampledFrame> frames) {
  if (auto it = threads_.find(thread); it != threads_.end() && ts_ns < it->second.last_ns) {
    exact_late_++;
    return;
  }
  OnSample(thread, ts_ns, frames);
}

void StackSpans::EndThread(uint64_t thread) {
  auto it = threads_.find(thread);
  if (it == threads_.end()) return;
  const uint64_t end_ns = it->second.last_ns + period_ns_;
  Close(thread, it->second, 0, end_ns);
  threads_.erase(it);
  if (ended_.size() >= kMaxThreads)
    absl::erase_if(ended_, [&](const auto& kv) { return kv.second + kEndedKeptNs < newest_ns_; });
  if (ended_.size() < kMaxThreads) ended_[thread] = end_ns;
}

void StackSpans::EndAll() {
  for (auto& [thread, t] : threads_) Close(thread, t, 0, t.last_ns + period_ns_);
  threads_.clear();
}

void StackSpans::ForEachOpen(uint64_t now_ns, const std::function<void(const StackSpan&)>& visit) const {
  for (const auto& [thread, t] : threads_) {
    const uint64_t end = std::max(std::min(t.last_ns + period_ns_, now_ns), t.last_ns);
    for (size_t i = 0; i < t.open.size(); i++)
      visit({thread, t.open[i].start_ns, std::max(end, t.open[i].start_ns), t.open[i].frame.frame,
             static_cast<uint16_t>(i)});
  }
}

}  // namespace gpuflame::profiler::timeline
