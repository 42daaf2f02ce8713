#include "profiler/forensics/growth.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

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
  // Each process's allocations so far and in use, per level.
  absl::flat_hash_map<uint64_t, std::pair<int64_t, int64_t>> totals;
  for (StackId id = 0; id < counters.size() && id < stacks.size(); id++) {
    const StackCounters& c = counters[id];
    if (c.alloc_objects == 0 && c.inuse_bytes == 0) continue;
    const StackInfo& info = stacks.Get(id);
    auto& [allocations, inuse] = totals[ProcessKey(info.pid, info.domain)];
    allocations += c.alloc_objects;
    inuse += c.inuse_bytes;
  }
  for (const auto& [key, t] : totals) processes_.try_emplace(key, ProcessSeries{index, {}, {}});
  // Whether a process allocated in the interval that ends here.
  absl::flat_hash_set<uint64_t> allocated;
  for (auto& [key, p] : processes_) {
    auto it = totals.find(key);
    // A process whose stacks all went (retired) keeps its count: no allocation.
    const int64_t made =
        std::max(it == totals.end() ? 0 : it->second.first, p.allocations.empty() ? 0 : p.allocations.back());
    if (made > (p.allocations.empty() ? 0 : p.allocations.back())) allocated.insert(key);
    p.allocations.push_back(made);
    p.inuse.push_back(it == totals.end() ? 0 : it->second.second);
  }
  auto inuse = [&](StackId id) { return id < counters.size() ? counters[id].inuse_bytes : 0; };
  // The series under way: one more value, or ended where the stack holds
  // nothing now. An ended series goes once its process allocates again or
  // the stack holds memory again (a new series), and any series goes where
  // its id went to another process's or level's stack.
  for (auto it = series_.begin(); it != series_.end();) {
    const StackId id = it->first;
    Series& s = it->second;
    const int64_t v = inuse(id);
    const bool same = id < stacks.size() && stacks.Get(id).pid == s.pid && stacks.Get(id).domain == s.domain;
    if (!same || (s.ended && (v != 0 || allocated.contains(ProcessKey(s.pid, s.domain))))) {
      series_.erase(it++);
      continue;
    }
    if (!s.ended) {
      if (v == 0) s.ended = true;
      else s.values.push_back(v);
    }
    ++it;
  }
  // New holders start a series here.
  for (StackId id = 0; id < counters.size() && id < stacks.size(); id++) {
    const int64_t v = counters[id].inuse_bytes;
    if (v == 0 || series_.contains(id)) continue;
    const StackInfo& info = stacks.Get(id);
    series_.emplace(id, Series{info.pid, info.domain, index, {v}});
  }
}

void GrowthTracker::Halve() {
  std::vector<uint64_t> kept;
  kept.reserve(times_.size() / 2 + 1);
  for (size_t i = 0; i < times_.size(); i += 2) kept.push_back(times_[i]);
  // Boundary i (even) becomes i / 2. What starts at an odd boundary starts
  // at the next even one; for a stack's series, the kept boundary before it
  // is one at which the stack held nothing, as before.
  auto keep_even = [](size_t start, std::vector<int64_t>& values) {
    std::vector<int64_t> out;
    out.reserve(values.size() / 2 + 1);
    for (size_t k = 0; k < values.size(); k++)
      if ((start + k) % 2 == 0) out.push_back(values[k]);
    values = std::move(out);
  };
  for (auto& [id, s] : series_) {
    keep_even(s.start, s.values);
    s.start = (s.start + 1) / 2;
  }
  for (auto it = series_.begin(); it != series_.end();) {
    // An ended series of one odd boundary has nothing left.
    if (it->second.values.empty()) {
      series_.erase(it++);
      continue;
    }
    ++it;
  }
  for (auto it = processes_.begin(); it != processes_.end();) {
    ProcessSeries& p = it->second;
    keep_even(p.start, p.allocations);
    keep_even(p.start, p.inuse);
    p.start = (p.start + 1) / 2;
    // A process first seen at the last boundary, which goes: seen anew at the next.
    if (p.allocations.empty()) {
      processes_.erase(it++);
      continue;
    }
    ++it;
  }
  times_ = std::move(kept);
  period_ns_ *= 2;
}

size_t GrowthTracker::EndBoundary(const ProcessSeries& p, bool ended) const {
  const size_t last = times_.size() - 1;
  if (!ended || p.allocations.empty()) return last;
  // The boundary that ends the interval of its last allocation (its first,
  // if it made them all before that).
  size_t a = p.start;
  for (size_t k = p.allocations.size(); k-- > 1;)
    if (p.allocations[k] > p.allocations[k - 1]) {
      a = p.start + k;
      break;
    }
  // From the boundary before it (that interval may hold teardown too), the
  // highest in use, the latest of equals.
  size_t best = a > p.start ? a - 1 : a;
  for (size_t k = best; k < p.start + p.inuse.size(); k++)
    if (p.inuse[k - p.start] >= p.inuse[best - p.start]) best = k;
  return best;
}

void GrowthTracker::ForgetStacks(std::span<const StackId> stacks) {
  for (StackId id : stacks) series_.erase(id);
}

std::vector<GrowingStack> GrowthTracker::Growing(const std::function<bool(pid_t)>& ended) const {
  std::vector<GrowingStack> out;
  const size_t n = times_.size();
  if (n < 2) return out;
  const GrowthThresholds& t = options_.thresholds;
  absl::flat_hash_map<uint64_t, size_t> end_of;  // each process's end boundary
  for (const auto& [key, p] : processes_) end_of[key] = EndBoundary(p, ended && ended(static_cast<pid_t>(key >> 8)));
  for (const auto& [id, s] : series_) {
    const uint64_t key = ProcessKey(s.pid, s.domain);
    const auto process = processes_.find(key);
    if (process == processes_.end()) continue;
    const size_t end = end_of[key];
    if (s.values.empty() || end < s.start || end >= s.start + s.values.size()) continue;  // not held at its end
    // From the first boundary: its value there; from a later one: zero at the one before.
    const bool from_first = s.start == 0;
    int64_t prev = from_first ? s.values[0] : 0;
    const int64_t first = prev;
    size_t grown = 0;
    for (size_t k = from_first ? 1 : 0; k <= end - s.start; k++) {
      grown += s.values[k] > prev;
      prev = s.values[k];
    }
    const size_t intervals = from_first ? end : end - s.start + 1;
    const int64_t growth = prev - first;
    if (growth <= 0 || grown < t.min_intervals_grown ||
        static_cast<double>(grown) < t.min_grown_share * static_cast<double>(intervals) - 1e-9)
      continue;
    const int64_t process_inuse = process->second.inuse[end - process->second.start];
    if (growth < t.min_bytes && static_cast<double>(growth) < t.min_process_share * static_cast<double>(process_inuse))
      continue;
    const bool at_last = !s.ended && s.start + s.values.size() == n;
    out.push_back(GrowingStack{id, s.pid, s.domain, growth, grown, intervals, first, prev, times_[s.start], times_[end],
                               process_inuse, end + 1 != n, at_last ? s.values.back() : 0});
  }
  std::sort(out.begin(), out.end(), [](const GrowingStack& a, const GrowingStack& b) {
    return a.growth_bytes != b.growth_bytes ? a.growth_bytes > b.growth_bytes : a.stack < b.stack;
  });
  return out;
}

size_t GrowthTracker::MemoryUsage() const {
  size_t bytes = times_.capacity() * sizeof(uint64_t) + series_.capacity() * sizeof(std::pair<StackId, Series>) +
                 processes_.capacity() * sizeof(std::pair<uint64_t, ProcessSeries>);
  for (const auto& [id, s] : series_) bytes += s.values.capacity() * sizeof(int64_t);
  for (const auto& [key, p] : processes_) bytes += (p.allocations.capacity() + p.inuse.capacity()) * sizeof(int64_t);
  return bytes;
}

}  // namespace gpuflame::profiler
