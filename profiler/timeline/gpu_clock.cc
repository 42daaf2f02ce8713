#include "profiler/timeline/gpu_clock.h"

#include <algorithm>

namespace gpuflame::profiler::timeline {

void GpuClock::OnSnapshot(pid_t pid, uint64_t cupti_ns, uint64_t mono_before_ns, uint64_t mono_after_ns) {
  Process& p = processes_[pid];
  // The agent's flight recorder converts only recent records: at the cap,
  // the older half goes (a process running for days keeps its clock).
  if (keep_recent_ && p.snapshots.size() >= kMaxSnapshots)
    p.snapshots.erase(p.snapshots.begin(), p.snapshots.begin() + kMaxSnapshots / 2);
  // The workload's numbers: a bracket must be ordered and narrow, and time
  // must go forward, or the snapshot says nothing.
  if (mono_after_ns < mono_before_ns || mono_after_ns - mono_before_ns > kMaxBracketNs ||
      p.snapshots.size() >= kMaxSnapshots || (!p.snapshots.empty() && cupti_ns <= p.snapshots.back().cupti_ns)) {
    p.alignment.rejected++;
    return;
  }
  const uint64_t half = (mono_after_ns - mono_before_ns) / 2;
  const int64_t offset = static_cast<int64_t>(cupti_ns - (mono_before_ns + half));
  if (!p.snapshots.empty()) {
    const int64_t step = offset - p.snapshots.back().offset_ns;
    p.alignment.max_step_ns = std::max(p.alignment.max_step_ns, static_cast<uint64_t>(step < 0 ? -step : step));
  }
  p.alignment.max_uncertainty_ns = std::max(p.alignment.max_uncertainty_ns, half);
  p.alignment.snapshots++;
  p.snapshots.push_back({cupti_ns, offset});
}

template <typename On>
std::optional<int64_t> GpuClock::OffsetAt(const std::vector<Snapshot>& s, uint64_t t, On on) {
  if (s.empty()) return std::nullopt;
  // Snapshots ascend as the library read them; a hostile process's disorder
  // only misplaces the search (upper_bound stays within the vector), and
  // two snapshots at one instant give the earlier one's offset.
  auto after = std::upper_bound(s.begin(), s.end(), t, [&](uint64_t v, const Snapshot& snap) { return v < on(snap); });
  if (after == s.begin()) return s.front().offset_ns;
  if (after == s.end()) return s.back().offset_ns;
  const Snapshot& a = *(after - 1);
  const Snapshot& b = *after;
  const uint64_t ta = on(a), tb = on(b);
  const double f = tb > ta ? static_cast<double>(t - ta) / static_cast<double>(tb - ta) : 0.0;
  return a.offset_ns + static_cast<int64_t>(f * static_cast<double>(b.offset_ns - a.offset_ns));
}

std::optional<uint64_t> GpuClock::ToMonotonic(pid_t pid, uint64_t cupti_ns) const {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return std::nullopt;
  const std::optional<int64_t> offset =
      OffsetAt(it->second.snapshots, cupti_ns, [](const Snapshot& snap) { return snap.cupti_ns; });
  if (!offset) return std::nullopt;
  return cupti_ns - static_cast<uint64_t>(*offset);
}

std::optional<uint64_t> GpuClock::ToCupti(pid_t pid, uint64_t mono_ns) const {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return std::nullopt;
  // Each snapshot's monotonic time (the bracket's middle).
  const std::optional<int64_t> offset = OffsetAt(it->second.snapshots, mono_ns, [](const Snapshot& snap) {
    return snap.cupti_ns - static_cast<uint64_t>(snap.offset_ns);
  });
  if (!offset) return std::nullopt;
  return mono_ns + static_cast<uint64_t>(*offset);
}

ClockAlignment GpuClock::Alignment(pid_t pid) const {
  auto it = processes_.find(pid);
  return it == processes_.end() ? ClockAlignment{} : it->second.alignment;
}

}  // namespace gpuflame::profiler::timeline
