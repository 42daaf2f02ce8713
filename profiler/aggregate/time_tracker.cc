#include "profiler/aggregate/time_tracker.h"

#include "absl/container/flat_hash_set.h"

namespace gpuflame::profiler {

void TimeTracker::Add(StackId stack, uint32_t label, int64_t count, int64_t nanos, int64_t observed_nanos) {
  if (observed_nanos < 0) observed_nanos = nanos;
  TimeKey key{stack, label};
  for (TimeCounters* c : {&totals_[key], &window_[key]}) {
    c->count += count;
    c->nanos += nanos;
    c->observed_nanos += observed_nanos;
  }
}

uint32_t TimeTracker::Label(const std::string& label) {
  if (label.empty()) return 0;
  auto [it, inserted] = label_ids_.try_emplace(label, static_cast<uint32_t>(labels_.size()));
  if (inserted) labels_.push_back(label);
  return it->second;
}

void TimeTracker::Forget(const std::vector<StackId>& ids) {
  if (ids.empty() || (totals_.empty() && window_.empty())) return;
  absl::flat_hash_set<StackId> gone(ids.begin(), ids.end());
  absl::erase_if(totals_, [&](const auto& kv) { return gone.contains(kv.first.stack); });
  absl::erase_if(window_, [&](const auto& kv) { return gone.contains(kv.first.stack); });
}

absl::flat_hash_map<TimeKey, TimeCounters> TimeTracker::TakeWindow() {
  absl::flat_hash_map<TimeKey, TimeCounters> out;
  out.swap(window_);
  return out;
}

}  // namespace gpuflame::profiler
