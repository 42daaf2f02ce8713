#include "profiler/timeline/gpu_clock.h"

#include <algorithm>

namespace gpuflame::profiler::timeline {

void GpuClock::OnSnapshot(pid_t pid, uint64_t cupti_ns, uint64_t mono_before_ns, uint64_t mono_after_ns) {
  Process& p = processes_[pid];
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

std::optional<uint64_t> GpuClock::ToMonotonic(pid_t pid, uint64_t cupti_ns) const {
  auto it = processes_.find(pid);
  if (it == processes_.end() || it->second.snapshots.empty()) return std::nullopt;
  const std::vector<Snapshot>& s = it->second.snapshots;
  auto after = std::upper_bound(s.begin(), s.end(), cupti_ns,
                                [](uint64_t t, const Snapshot& snap) { return t < snap.cupti_ns; });
  int64_t offset;
  if (after == s.begin()) {
    offset = s.front().offset_ns;
  } else if (after == s.end()) {
    offset = s.back().offset_ns;
  } else {
    // Between two snapshots: the offset moves linearly from one to the other.
    const Snapshot& a = *(after - 1);
    const Snapshot& b = *after;
    const double f = static_cast<double>(cupti_ns - a.cupti_ns) / static_cast<double>(b.cupti_ns - a.cupti_ns);
    offset = a.offset_ns + static_cast<int64_t>(f * static_cast<double>(b.offset_ns - a.offset_ns));
  }
  return cupti_ns - static_cast<uint64_t>(offset);
}

std::optional<uint64_t> GpuClock::ToCupti(pid_t pid, uint64_t mono_ns) const {
  auto it = processes_.find(pid);
  if (it == processes_.end() || it->second.snapshots.empty()) return std::nullopt;
  const std::vector<Snapshot>& s = it->second.snapshots;
  // Each snapshot's monotonic time (the bracket's middle). They ascend as
  // the library read them; a hostile process's disorder only misplaces the
  // search (upper_bound stays within the vector), as in ToMonotonic.
  auto mono = [](const Snapshot& snap) { return snap.cupti_ns - static_cast<uint64_t>(snap.offset_ns); };
  auto after =
      std::upper_bound(s.begin(), s.end(), mono_ns, [&](uint64_t t, const Snapshot& snap) { return t < mono(snap); });
  int64_t offset;
  if (after == s.begin()) {
    offset = s.front().offset_ns;
  } else if (after == s.end()) {
    offset = s.back().offset_ns;
  } else {
    const Snapshot& a = *(after - 1);
    const Snapshot& b = *after;
    const uint64_t ma = mono(a), mb = mono(b);
    const double f = mb > ma ? static_cast<double>(mono_ns - ma) / static_cast<double>(mb - ma) : 0.0;
    offset = a.offset_ns + static_cast<int64_t>(f * static_cast<double>(b.offset_ns - a.offset_ns));
  }
  return mono_ns + static_cast<uint64_t>(offset);
}

ClockAlignment GpuClock::Alignment(pid_t pid) const {
  auto it = processes_.find(pid);
  return it == processes_.end() ? ClockAlignment{} : it->second.alignment;
}

}  // namespace gpuflame::profiler::timeline
