#include "profiler/time_tracker.h"

namespace gpuflame::profiler {

void TimeTracker::Add(StackId stack, uint32_t label, int64_t count, int64_t nanos) {
  TimeKey key{stack, label};
  TimeCounters& t = totals_[key];
  t.count += count;
  t.nanos += nanos;
  TimeCounters& w = window_[key];
  w.count += count;
  w.nanos += nanos;
}

uint32_t TimeTracker::Label(const std::string& label) {
  if (label.empty()) return 0;
  auto [it, inserted] = label_ids_.try_emplace(label, static_cast<uint32_t>(labels_.size()));
  if (inserted) labels_.push_back(label);
  return it->second;
}

absl::flat_hash_map<TimeKey, TimeCounters> TimeTracker::TakeWindow() {
  absl::flat_hash_map<TimeKey, TimeCounters> out;
  out.swap(window_);
  return out;
}

}  // namespace gpuflame::profiler
