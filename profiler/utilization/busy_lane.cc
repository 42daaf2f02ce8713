#include "profiler/utilization/busy_lane.h"

#include <algorithm>

namespace gpuflame::profiler::utilization {

CopyDirection DirectionOf(uint8_t cupti_copy_kind) {
  switch (cupti_copy_kind) {
    case 1: return kHtoD;
    case 2: return kDtoH;
    case 8: return kDtoD;
    default: return kOtherCopy;
  }
}

const char* DirectionName(CopyDirection d) {
  static constexpr const char* kNames[] = {"h2d", "d2h", "d2d", "other"};
  return d < kCopyDirections ? kNames[d] : "other";
}

void PartStats::Merge(const PartStats& o) {
  if (o.end_ns != 0) {  // |o| saw work (a part's end is set by its first record)
    start_ns = end_ns == 0 ? o.start_ns : std::min(start_ns, o.start_ns);
    end_ns = std::max(end_ns, o.end_ns);
  }
  busy_ns += o.busy_ns;
  gap_ns += o.gap_ns;
  gaps += o.gaps;
  short_gap_ns += o.short_gap_ns;
  kernels += o.kernels;
  short_kernels += o.short_kernels;
  kernel_ns += o.kernel_ns;
  kernel_durations.Merge(o.kernel_durations);
  for (size_t d = 0; d < copies.size(); d++) {
    copies[d].count += o.copies[d].count;
    copies[d].bytes += o.copies[d].bytes;
    copies[d].ns += o.copies[d].ns;
  }
  memsets += o.memsets;
  memset_bytes += o.memset_bytes;
}

void BusyLane::Add(const gf_kernel_record& r) {
  counts_.records++;
  if (r.weight > 1) counts_.weighted_records++;
  uint64_t end = r.end_ns;
  if (end < r.start_ns) {
    counts_.implausible++;
    end = r.start_ns;
  }
  pending_.push({r.start_ns, end, r.bytes, r.kind, r.copy_kind});
  newest_start_ = std::max(newest_start_, r.start_ns);
  while (pending_.size() > o_.max_pending) {
    counts_.forced++;
    Apply(pending_.top());
    pending_.pop();
  }
}

void BusyLane::Settle(bool everything) {
  while (!pending_.empty() && (everything || pending_.top().start_ns + o_.reorder_ns <= newest_start_)) {
    Apply(pending_.top());
    pending_.pop();
  }
  if (everything && running_) {
    CloseRun();
    running_ = false;
  }
}

void BusyLane::Apply(const Pending& p) {
  if (parts_.empty()) {
    parts_.emplace_back();
    parts_.back().start_ns = p.start_ns;
    origin_ns_ = p.start_ns - p.start_ns % window_ns_;
  }
  if (running_ && p.start_ns < run_start_) {
    // Its place in the union is gone: counted, not merged.
    counts_.late_records++;
    counts_.late_ns += p.end_ns - p.start_ns;
  } else if (!running_) {
    running_ = true;
    run_start_ = p.start_ns;
    run_end_ = p.end_ns;
  } else if (p.start_ns <= run_end_) {
    run_end_ = std::max(run_end_, p.end_ns);
  } else {
    CloseRun();
    const uint64_t gap_start = run_end_;
    run_start_ = p.start_ns;
    run_end_ = p.end_ns;
    OnGap(gap_start, p.start_ns);  // may open a new part, which this record then belongs to
  }
  PartStats& part = parts_.back();
  part.end_ns = std::max(part.end_ns, p.end_ns);
  const uint64_t ns = p.end_ns - p.start_ns;
  switch (p.kind) {
    case GF_GPU_KERNEL:
      part.kernels++;
      part.kernel_ns += ns;
      if (ns < o_.short_kernel_ns) part.short_kernels++;
      part.kernel_durations.Add(ns);
      windows_[WindowIndex(p.start_ns)].kernels++;
      break;
    case GF_GPU_MEMCPY: {
      CopyStats& c = part.copies[DirectionOf(p.copy_kind)];
      c.count++;
      c.bytes += p.bytes;
      c.ns += ns;
      break;
    }
    case GF_GPU_MEMSET:
      part.memsets++;
      part.memset_bytes += p.bytes;
      break;
    default: break;
  }
}

void BusyLane::CloseRun() {
  parts_.back().busy_ns += run_end_ - run_start_;
  AddToWindows(run_start_, run_end_, &Window::busy_ns);
}

void BusyLane::OnGap(uint64_t start, uint64_t end) {
  const uint64_t len = end - start;
  if (len < o_.gap_ns) {
    parts_.back().short_gap_ns += len;
    return;
  }
  if (gaps_.size() < o_.max_gaps) gaps_.push_back({start, end});
  else counts_.gaps_not_kept++;
  AddToWindows(start, end, &Window::gap_ns);
  if (len >= o_.pause_ns && parts_.size() < o_.max_parts) {
    pauses_.push_back({start, end});
    parts_.emplace_back();
    parts_.back().start_ns = end;
    return;
  }
  if (len >= o_.pause_ns) counts_.pauses_in_last_part++;
  parts_.back().gap_ns += len;
  parts_.back().gaps++;
}

size_t BusyLane::WindowIndex(uint64_t t) {
  uint64_t i = t > origin_ns_ ? (t - origin_ns_) / window_ns_ : 0;
  while (i >= o_.max_windows) {
    // Full: every two windows become one, and the period doubles, so the
    // strip always spans the whole run.
    for (size_t k = 0; k < windows_.size(); k++) {
      Window& w = windows_[k / 2];
      const Window src = windows_[k];
      if (k % 2 == 0) w = src;
      else {
        w.busy_ns += src.busy_ns;
        w.gap_ns += src.gap_ns;
        w.kernels += src.kernels;
      }
    }
    windows_.resize((windows_.size() + 1) / 2);
    window_ns_ *= 2;  // from the same origin: window j is the old 2j and 2j+1
    i = t > origin_ns_ ? (t - origin_ns_) / window_ns_ : 0;
  }
  if (i >= windows_.size()) windows_.resize(i + 1);
  return i;
}

void BusyLane::AddToWindows(uint64_t start, uint64_t end, uint64_t Window::*field) {
  if (end <= start) return;
  WindowIndex(end - 1);  // coarsens first if the span ends past the last window
  for (size_t i = WindowIndex(start); start < end; i++) {
    const uint64_t window_end = origin_ns_ + (i + 1) * window_ns_;
    const uint64_t piece_end = std::min(end, window_end);
    windows_[i].*field += piece_end - start;
    start = piece_end;
  }
}

PartStats BusyLane::Whole() const {
  PartStats whole;
  for (const PartStats& p : parts_) whole.Merge(p);
  for (const Gap& g : pauses_) {
    whole.gap_ns += g.end_ns - g.start_ns;
    whole.gaps++;
  }
  return whole;
}

}  // namespace gpuflame::profiler::utilization
