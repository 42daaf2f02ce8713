#include "profiler/forensics/oom_episodes.h"

#include <time.h>

#include <algorithm>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {
namespace {

int64_t Now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// CLOCK_MONOTONIC |ts_ns| (the records' clock) on the wall clock.
int64_t WallOf(uint64_t ts_ns) { return Now(CLOCK_REALTIME) - (Now(CLOCK_MONOTONIC) - static_cast<int64_t>(ts_ns)); }

}  // namespace

std::vector<FrameId> OomEpisodes::FramesOf(StackId stack) const {
  if (stack == StackTable::kNone || stack >= stacks_.size()) return {};
  return stacks_.Get(stack).frames;
}

OomLiveSet OomEpisodes::LiveSet(pid_t pid, uint8_t domain) const {
  OomLiveSet set;
  const std::vector<StackCounters>& counters = tracker_.counters();
  for (StackId id = 0; id < stacks_.size() && id < counters.size(); id++) {
    const StackInfo& stack = stacks_.Get(id);
    const StackCounters& c = counters[id];
    if (stack.pid != pid || stack.domain != domain || (c.inuse_bytes == 0 && c.inuse_objects == 0)) continue;
    set.holders.push_back({stack.frames, c.inuse_objects, c.inuse_bytes});
    set.objects += c.inuse_objects;
    set.bytes += c.inuse_bytes;
    set.estimated |= c.alloc_samples != c.alloc_objects || c.observed_bytes != c.alloc_bytes;
  }
  // Largest first; equal ones in a fixed order (by frames), so output is stable.
  std::sort(set.holders.begin(), set.holders.end(), [](const OomHolder& a, const OomHolder& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.frames < b.frames;
  });
  return set;
}

OomEpisodes::Episode* OomEpisodes::Open(pid_t pid, uint64_t ts_ns) {
  stats_.episodes++;
  const uint32_t number = ++episodes_of_[static_cast<uint32_t>(pid)];
  if (open_.size() >= kMaxOpen) {
    stats_.not_captured++;
    return nullptr;
  }
  Episode& e = open_[static_cast<uint32_t>(pid)];
  e.opened_ns = ts_ns;
  e.capture.pid = pid;
  e.capture.number = number;
  // Over the bounds, the episode is still followed (its retries are its own,
  // not new episodes), but nothing of it is kept.
  e.capturing = number <= kMaxCapturesPerProcess && done_.size() < kMaxWaiting;
  if (!e.capturing) return &e;
  e.capture.wall_ns = WallOf(ts_ns);
  if (context_) e.capture.context = context_(pid);
  e.capture.device = LiveSet(pid, GF_DOMAIN_GPU);
  e.awaiting_tensors = e.capture.context.tensors_expected;
  if (e.awaiting_tensors) awaiting_tensors_++;
  return &e;
}

void OomEpisodes::TakeTensors(Episode& e) {
  if (!e.awaiting_tensors) return;
  e.awaiting_tensors = false;
  awaiting_tensors_--;
  e.capture.tensors = LiveSet(e.capture.pid, GF_DOMAIN_TORCH);
  if (totals_) e.capture.totals = totals_(e.capture.pid);
}

void OomEpisodes::OnAllocFailed(pid_t pid, uint32_t tid, uint64_t ts_ns, uint16_t api, uint64_t bytes, uint32_t error,
                                StackId stack) {
  stats_.failed_calls++;
  if (auto it = open_.find(static_cast<uint32_t>(pid)); it != open_.end()) {
    // A retry, or another thread's call meanwhile: the same episode.
    it->second.capture.failed_calls++;
    return;
  }
  Episode* e = Open(pid, ts_ns);
  if (!e) return;
  e->capture.failed_calls = 1;
  if (e->capturing) e->capture.request = OomRequest{ts_ns, tid, api, bytes, error, FramesOf(stack)};
  else e->capture.request = OomRequest{ts_ns, tid, api, bytes, error, {}};  // its thread, for the retry
}

void OomEpisodes::OnTorchReport(pid_t pid, OomTorchReport report, StackId stack) {
  stats_.torch_reports++;
  const auto upid = static_cast<uint32_t>(pid);
  auto it = open_.find(upid);
  // An episode that already ended (a retry succeeded) and only waits for
  // its tensor events: this report is another episode's.
  if (it != open_.end() && it->second.capture.outcome_ns != 0) {
    EndIfComplete(upid, /*force=*/true);
    it = open_.end();
  }
  Episode* e = it != open_.end() ? &it->second : Open(pid, report.ts_ns);
  if (!e) return;
  // In-process, the report follows every tensor event made before it:
  // the tensor level is current now (so it is on the probes' path).
  TakeTensors(*e);
  if (e->capturing) report.frames = FramesOf(stack);
  e->capture.outcome = OomOutcome::kRaised;
  e->capture.outcome_ns = report.ts_ns;
  e->capture.torch = std::move(report);
  EndIfComplete(upid, /*force=*/false);
}

void OomEpisodes::RetrySucceeded(pid_t pid, uint32_t tid, uint64_t ts_ns) {
  const auto upid = static_cast<uint32_t>(pid);
  auto it = open_.find(upid);
  if (it == open_.end()) return;
  Episode& e = it->second;
  if (e.capture.outcome_ns != 0 || !e.capture.request || e.capture.request->tid != tid || ts_ns < e.opened_ns) return;
  e.capture.outcome = OomOutcome::kRetrySucceeded;
  e.capture.outcome_ns = ts_ns;
  EndIfComplete(upid, /*force=*/false);
}

void OomEpisodes::CatchUp(pid_t pid, uint64_t ts_ns) {
  const auto upid = static_cast<uint32_t>(pid);
  auto it = open_.find(upid);
  if (it == open_.end() || !it->second.awaiting_tensors || ts_ns < it->second.opened_ns) return;
  TakeTensors(it->second);
  EndIfComplete(upid, /*force=*/false);
}

void OomEpisodes::OnProcessExit(pid_t pid, uint64_t ts_ns) {
  auto it = open_.find(static_cast<uint32_t>(pid));
  if (it == open_.end()) return;
  // Its live set is about to go; its counters stay until it is retired, but
  // nothing it does from here changes them.
  TakeTensors(it->second);
  it->second.exited_ns = std::max<uint64_t>(ts_ns, 1);
}

void OomEpisodes::EndIfComplete(uint32_t pid, bool force) {
  auto it = open_.find(pid);
  if (it == open_.end()) return;
  Episode& e = it->second;
  if (!force && (e.capture.outcome_ns == 0 || e.awaiting_tensors)) return;
  TakeTensors(e);  // given up on: as it is now
  if (e.capture.outcome_ns == 0 && e.exited_ns != 0) e.capture.outcome = OomOutcome::kProcessExited;
  if (!e.capturing) {
    stats_.not_captured++;
  } else {
    stats_.captured++;
    switch (e.capture.outcome) {
      case OomOutcome::kRetrySucceeded: stats_.retry_succeeded++; break;
      case OomOutcome::kRaised: stats_.raised++; break;
      case OomOutcome::kProcessExited: stats_.exited++; break;
      case OomOutcome::kUnresolved: stats_.unresolved++; break;
    }
    done_.push_back(std::move(e.capture));
  }
  open_.erase(it);
}

void OomEpisodes::Tick(uint64_t now_ns) {
  if (open_.empty()) return;
  std::vector<uint32_t> due;
  for (const auto& [pid, e] : open_)
    if ((e.exited_ns != 0 && now_ns >= e.exited_ns + kExitGraceNs) || now_ns >= e.opened_ns + kSettleNs)
      due.push_back(pid);
  std::sort(due.begin(), due.end());  // a fixed order for the captures handed out
  for (uint32_t pid : due) EndIfComplete(pid, /*force=*/true);
}

void OomEpisodes::FinishAll() {
  std::vector<uint32_t> all;
  for (const auto& [pid, e] : open_) all.push_back(pid);
  std::sort(all.begin(), all.end());
  for (uint32_t pid : all) EndIfComplete(pid, /*force=*/true);
}

void OomEpisodes::Forget(std::span<const pid_t> pids) {
  for (pid_t pid : pids) {
    EndIfComplete(static_cast<uint32_t>(pid), /*force=*/true);
    episodes_of_.erase(static_cast<uint32_t>(pid));
  }
}

}  // namespace gpuflame::profiler
