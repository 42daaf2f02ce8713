#include "profiler/aggregate/peak_tracker.h"

#include "absl/container/flat_hash_set.h"
#include "base/saturating.h"

namespace gpuflame::profiler {

PeakTracker::Scope& PeakTracker::ScopeOf(uint64_t key) {
  if (cached_ && cached_key_ == key) return *cached_;
  // Elements of a flat_hash_map move when it grows: every insertion comes
  // through here and re-points the cache.
  Scope& scope = scopes_[key];
  cached_key_ = key;
  cached_ = &scope;
  return scope;
}

void PeakTracker::Change(StackId stack, uint32_t pid, uint8_t domain, int64_t objects, int64_t bytes,
                         int64_t d_objects, int64_t d_bytes, uint64_t ts_ns) {
  if (d_objects == 0 && d_bytes == 0) return;
  const uint64_t key = KeyOf(pid, domain);
  Scope& scope = ScopeOf(key);
  if (stack >= saved_.size()) {
    saved_.resize(stack + 1);
    scope_of_.resize(stack + 1, ~uint64_t{0});
  }
  scope_of_[stack] = key;
  // First change since the last peak: what it held then is what it holds now.
  Saved& s = saved_[stack];
  if (s.epoch != scope.epoch) {
    s.epoch = scope.epoch;
    s.objects = objects;
    s.bytes = bytes;
  }
  if (s.win_epoch != scope.win_epoch) {
    s.win_epoch = scope.win_epoch;
    s.win_objects = objects;
    s.win_bytes = bytes;
  }
  base::SaturatingAdd(scope.inuse, d_bytes);
  // A new maximum: every stack's value now is its value at the peak, which
  // a newer epoch says to all of them at once.
  if (scope.inuse > scope.win_peak) {
    scope.win_peak = scope.inuse;
    scope.win_epoch++;
    scope.win_peak_ts = ts_ns;
    if (scope.inuse > scope.peak) {
      scope.peak = scope.inuse;
      scope.epoch++;
      scope.peak_ts = ts_ns;
      scope.all_time_in_window = true;
    }
  }
}

std::pair<int64_t, int64_t> PeakTracker::AtPeak(StackId stack, int64_t objects, int64_t bytes,
                                                PeakScope which) const {
  if (stack >= saved_.size()) return {0, 0};
  auto it = scopes_.find(scope_of_[stack]);
  if (it == scopes_.end()) return {0, 0};
  const Saved& s = saved_[stack];
  if (which == PeakScope::kAllTime) return s.epoch == it->second.epoch ? std::pair{s.objects, s.bytes} : std::pair{objects, bytes};
  return s.win_epoch == it->second.win_epoch ? std::pair{s.win_objects, s.win_bytes} : std::pair{objects, bytes};
}

PeakSummary PeakTracker::Summary(uint32_t pid, uint8_t domain, PeakScope which) const {
  auto it = scopes_.find(KeyOf(pid, domain));
  if (it == scopes_.end()) return {};
  const Scope& s = it->second;
  if (which == PeakScope::kAllTime) return {s.peak, s.peak_ts, false};
  return {s.win_peak, s.win_peak_ts, s.all_time_in_window};
}

void PeakTracker::StartWindow() {
  for (auto& [key, s] : scopes_) {
    s.win_peak = s.inuse;
    s.win_epoch++;  // the window's peak so far is the live set now, whole
    s.win_peak_ts = 0;
    s.all_time_in_window = false;
  }
}

void PeakTracker::ForgetStacks(std::span<const StackId> stacks) {
  for (StackId id : stacks)
    if (id < saved_.size()) {
      saved_[id] = Saved{};
      scope_of_[id] = ~uint64_t{0};
    }
}

void PeakTracker::ForgetProcesses(std::span<const pid_t> pids) {
  const absl::flat_hash_set<uint32_t> gone(pids.begin(), pids.end());
  absl::erase_if(scopes_, [&](const auto& kv) { return gone.contains(static_cast<uint32_t>(kv.first >> 8)); });
  cached_ = nullptr;
}

size_t PeakTracker::MemoryUsage() const {
  return scopes_.capacity() * (sizeof(std::pair<uint64_t, Scope>) + 1) +
         saved_.capacity() * sizeof(Saved) + scope_of_.capacity() * sizeof(uint64_t);
}

}  // namespace gpuflame::profiler
