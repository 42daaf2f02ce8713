#include "profiler/utilization/windowed_lane.h"

#include <algorithm>

namespace gpuflame::profiler::utilization {

double LaneJudgement::coverage() const {
  return wall_ns() ? static_cast<double>(observed_ns) / static_cast<double>(wall_ns()) : 0.0;
}

void WindowedLane::Add(const gf_kernel_record& r) {
  counts_.records++;
  if (pending_.size() >= o_.max_pending) {
    counts_.dropped++;
    return;
  }
  pending_.push_back({r.start_ns, std::max(r.end_ns, r.start_ns), r.bytes, r.kind, r.copy_kind});
}

void WindowedLane::Count(const Work& w, PartStats& f) const {
  const uint64_t ns = w.end_ns - w.start_ns;
  switch (w.kind) {
    case GF_GPU_KERNEL:
      f.kernels++;
      f.kernel_ns += ns;
      if (ns < o_.short_kernel_ns) f.short_kernels++;
      f.kernel_durations.Add(ns);
      break;
    case GF_GPU_MEMCPY: {
      CopyStats& c = f.copies[DirectionOf(w.copy_kind)];
      c.count++;
      c.bytes += w.bytes;
      c.ns += ns;
      break;
    }
    case GF_GPU_MEMSET:
      f.memsets++;
      f.memset_bytes += w.bytes;
      break;
    default: break;
  }
}

LaneJudgement WindowedLane::Judge(const std::vector<Gap>& spans, uint64_t newest_ns, bool everything) {
  LaneJudgement j;
  uint64_t horizon = 0;
  if (everything) {
    horizon = std::max(judged_to_, busy_end_);
    if (!spans.empty()) horizon = std::max(horizon, spans.back().end_ns);
    for (const Work& w : pending_) horizon = std::max(horizon, w.end_ns);
  } else {
    horizon = newest_ns > o_.reorder_ns ? newest_ns - o_.reorder_ns : 0;
  }
  uint64_t from = judged_to_;
  if (from == 0) {
    from = horizon;
    if (!spans.empty()) from = std::min(from, spans.front().start_ns);
    for (const Work& w : pending_) from = std::min(from, w.start_ns);
  }
  j.from_ns = j.to_ns = from;
  if (horizon <= from) return j;
  j.to_ns = horizon;
  const bool first = judged_to_ == 0;
  const bool carried_observed = span_observed_;
  const uint64_t carried_gap = open_gap_start_;
  span_observed_ = false;
  open_gap_start_ = 0;

  std::sort(pending_.begin(), pending_.end(), [](const Work& a, const Work& b) { return a.start_ns < b.start_ns; });
  const auto take_end = std::lower_bound(pending_.begin(), pending_.end(), horizon,
                                         [](const Work& w, uint64_t t) { return w.start_ns < t; });
  auto in_span = [&spans](uint64_t t) {
    auto it = std::upper_bound(spans.begin(), spans.end(), t, [](uint64_t v, const Gap& g) { return v < g.end_ns; });
    return it != spans.end() && it->start_ns <= t;
  };
  // The busy runs: a run carried from the last judgement, then this one's work.
  std::vector<Gap> runs;
  if (busy_end_ > from) runs.push_back({from, busy_end_});
  for (auto it = pending_.begin(); it != take_end; ++it) {
    const Work& w = *it;
    Count(w, j.figures);
    if (!first && w.start_ns < from) {
      counts_.late_records++;
      continue;
    }
    if (!in_span(w.start_ns)) counts_.outside_records++;
    if (!runs.empty() && w.start_ns <= runs.back().end_ns) runs.back().end_ns = std::max(runs.back().end_ns, w.end_ns);
    else runs.push_back({w.start_ns, w.end_ns});
  }
  pending_.erase(pending_.begin(), take_end);

  auto on_gap = [&](uint64_t start, uint64_t end) {
    const uint64_t len = end - start;
    if (len < o_.gap_ns) {
      j.figures.short_gap_ns += len;
      return;
    }
    j.figures.gap_ns += len;
    j.figures.gaps++;
    if (j.idle_gaps.size() < o_.max_gaps) j.idle_gaps.push_back({start, end});
    else j.gaps_not_kept++;
  };
  size_t u = 0;
  for (const Gap& span : spans) {
    const uint64_t a = std::max(span.start_ns, from), b = std::min(span.end_ns, horizon);
    if (b <= a) continue;
    const bool continues = !everything && span.end_ns > horizon;  // past this judgement's end
    const bool lead_done = a == from && span.start_ns < from && carried_observed;
    while (u < runs.size() && runs[u].end_ns <= a) u++;
    uint64_t o = 0;
    if (lead_done) o = a;
    else if (u < runs.size() && runs[u].start_ns < b) o = std::max(a, runs[u].start_ns);
    else {
      j.unjudged_ns += b - a;  // no work seen in it: busy with unrecorded work, or idle
      continue;
    }
    j.unjudged_ns += o - a;
    j.observed_ns += b - o;
    uint64_t cur = o;
    uint64_t hole_origin = lead_done ? carried_gap : 0;  // a hole open since the last judgement
    size_t k = u;
    for (; k < runs.size() && runs[k].start_ns < b; k++) {
      const uint64_t s = std::max(runs[k].start_ns, o), e = std::min(runs[k].end_ns, b);
      if (s > cur) on_gap(hole_origin ? hole_origin : cur, s);
      hole_origin = 0;
      if (e > s) j.figures.busy_ns += e - s;
      cur = std::max(cur, e);
      if (runs[k].end_ns > b) break;  // goes on past this span: the next may see it
    }
    u = k;
    if (cur < b) {
      const uint64_t hole = hole_origin ? hole_origin : cur;
      if (continues) open_gap_start_ = hole;  // judged when it ends
      else on_gap(hole, b);
    }
    if (continues) span_observed_ = true;
  }
  busy_end_ = !everything && !runs.empty() && runs.back().end_ns > horizon ? runs.back().end_ns : 0;
  judged_to_ = horizon;
  j.figures.start_ns = 0;
  j.figures.end_ns = j.observed_ns;
  return j;
}

}  // namespace gpuflame::profiler::utilization
