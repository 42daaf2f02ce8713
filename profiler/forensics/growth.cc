#include "profiler/forensics/growth.h"

#include <algorithm>

namespace gpuflame::profiler {

GrowthTracker::GrowthTracker(GrowthOptions options) : options_(options), period_ns_(options.period_ns) {
  // Halving keeps the first boundary and every other one: it needs two.
  options_.max_boundaries = std::max<size_t>(options_.max_boundaries, 2);
}

bool GrowthTracker::Tick(uint64_t now_ns, const std::vector<StackCounters>& counters, const StackTable& stacks) {
  if (!times_.empty() && now_ns < times_.back() + period_ns_) return false;
  TakeBoundary(now_ns, counters, stacks);
  return true;
}

void GrowthTracker::TakeBoundary(uint64_t now_ns, const std::vector<StackCounters>& counters,
                                 const StackTable& stacks) {
  if (times_.size() >= options_.max_boundaries) Halve();
  const size_t index = times_.size();
  times_.push_back(now_ns);
  auto inuse = [&](StackId id) { return id < counters.size() ? counters[id].inuse_bytes : 0; };
  // The series under way: one more value, or gone where the stack holds
  // nothing now or its id went to another process's or level's stack.
  for (auto it = series_.begin(); it != series_.end();) {
    const StackId id = it->first;
    Series& s = it->second;
    const int64_t v = inuse(id);
    const bool same = id < stacks.size() && stacks.Get(id).pid == s.pid && stacks.Get(id).domain == s.domain;
    if (v == 0 || !same) {
      series_.erase(it++);
      continue;
    }
    s.values.push_back(v);
    ++it;
  }
  // New holders start a series here; every holder counts for its process.
  process_inuse_.clear();
  for (StackId id = 0; id < counters.size(); id++) {
    const int64_t v = counters[id].inuse_bytes;
    if (v == 0 || id >= stacks.size()) continue;
    const StackInfo& info = stacks.Get(id);
    process_inuse_[ProcessKey(info.pid, info.domain)] += v;
    if (series_.contains(id)) continue;
    series_.emplace(id, Series{info.pid, info.domain, index, {v}});
  }
}

void GrowthTracker::Halve() {
  std::vector<uint64_t> kept;
  kept.reserve(times_.size() / 2 + 1);
  for (size_t i = 0; i < times_.size(); i += 2) kept.push_back(times_[i]);
  for (auto& [id, s] : series_) {
    // Boundary i (even) becomes i / 2. A series starting at an odd boundary
    // starts at the next even one; the kept boundary before it is one at
    // which the stack held nothing, as before.
    std::vector<int64_t> values;
    values.reserve(s.values.size() / 2 + 1);
    for (size_t k = 0; k < s.values.size(); k++)
      if ((s.start + k) % 2 == 0) values.push_back(s.values[k]);
    s.start = (s.start + 1) / 2;
    s.values = std::move(values);
  }
  times_ = std::move(kept);
  period_ns_ *= 2;
}

void GrowthTracker::ForgetStacks(std::span<const StackId> stacks) {
  for (StackId id : stacks) series_.erase(id);
}

std::vector<GrowingStack> GrowthTracker::Growing() const {
  std::vector<GrowingStack> out;
  const size_t n = times_.size();
  if (n < 2) return out;
  const GrowthThresholds& t = options_.thresholds;
  for (const auto& [id, s] : series_) {
    if (s.values.empty() || s.start + s.values.size() != n) continue;  // not at the last boundary
    // From the first boundary: its value there; from a later one: zero at the one before.
    const bool from_first = s.start == 0;
    int64_t prev = from_first ? s.values[0] : 0;
    const int64_t first = prev;
    size_t grown = 0;
    for (size_t k = from_first ? 1 : 0; k < s.values.size(); k++) {
      grown += s.values[k] > prev;
      prev = s.values[k];
    }
    const size_t intervals = from_first ? n - 1 : n - s.start;
    const int64_t growth = s.values.back() - first;
    if (growth <= 0 || grown < t.min_intervals_grown ||
        static_cast<double>(grown) < t.min_grown_share * static_cast<double>(intervals) - 1e-9)
      continue;
    const auto total = process_inuse_.find(ProcessKey(s.pid, s.domain));
    const int64_t process = total == process_inuse_.end() ? 0 : total->second;
    if (growth < t.min_bytes && static_cast<double>(growth) < t.min_process_share * static_cast<double>(process))
      continue;
    out.push_back(
        GrowingStack{id, s.pid, s.domain, growth, grown, intervals, first, s.values.back(), times_[s.start], process});
  }
  std::sort(out.begin(), out.end(), [](const GrowingStack& a, const GrowingStack& b) {
    return a.growth_bytes != b.growth_bytes ? a.growth_bytes > b.growth_bytes : a.stack < b.stack;
  });
  return out;
}

size_t GrowthTracker::MemoryUsage() const {
  size_t bytes = times_.capacity() * sizeof(uint64_t) + series_.capacity() * sizeof(std::pair<StackId, Series>) +
                 process_inuse_.capacity() * sizeof(std::pair<uint64_t, int64_t>);
  for (const auto& [id, s] : series_) bytes += s.values.capacity() * sizeof(int64_t);
  return bytes;
}

}  // namespace gpuflame::profiler
