#include "exporters/pprof/profile_limits.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "exporters/pprof/pprof_writer.h"

namespace gpuflame::exporters {
namespace {

// A sample's weight: its largest share of any sample type's total, so that a
// stack big in allocations but freed (in use 0) is still kept.
std::vector<double> Significance(const profiler::Profile& p) {
  std::vector<double> totals(p.sample_types.size(), 0);
  for (const profiler::Sample& s : p.samples)
    for (size_t i = 0; i < s.values.size() && i < totals.size(); i++) totals[i] += std::abs(double(s.values[i]));
  std::vector<double> out;
  out.reserve(p.samples.size());
  for (const profiler::Sample& s : p.samples) {
    double w = 0;
    for (size_t i = 0; i < s.values.size() && i < totals.size(); i++)
      if (totals[i] > 0) w = std::max(w, std::abs(double(s.values[i])) / totals[i]);
    out.push_back(w);
  }
  return out;
}

// Keeps the |keep| most significant samples and merges the rest into one.
size_t FoldTo(profiler::Profile& p, size_t keep) {
  if (p.samples.size() <= keep) return 0;
  std::vector<double> weight = Significance(p);
  std::vector<size_t> order(p.samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weight[a] > weight[b]; });
  uint32_t other_frame = 0;
  auto it = std::find_if(p.frames.begin(), p.frames.end(), [](const symbolizer::Frame& f) {
    return f.kind == symbolizer::FrameKind::kMarker && f.name == kOtherFrame;
  });
  if (it == p.frames.end()) {
    symbolizer::Frame f;
    f.kind = symbolizer::FrameKind::kMarker;
    f.name = kOtherFrame;
    other_frame = static_cast<uint32_t>(p.frames.size());
    p.frames.push_back(f);
  } else {
    other_frame = static_cast<uint32_t>(it - p.frames.begin());
  }
  profiler::Sample other;
  other.frames = {other_frame};
  other.values.assign(p.sample_types.size(), 0);
  std::vector<profiler::Sample> kept;
  kept.reserve(keep);
  size_t folded = 0;
  for (size_t rank = 0; rank < order.size(); rank++) {
    profiler::Sample& s = p.samples[order[rank]];
    if (rank + 1 < keep) {  // one slot is [other]'s
      kept.push_back(std::move(s));
      continue;
    }
    for (size_t i = 0; i < other.values.size() && i < s.values.size(); i++) other.values[i] += s.values[i];
    folded++;
  }
  kept.push_back(std::move(other));
  p.samples = std::move(kept);
  return folded;
}

}  // namespace

LimitReport EnforceLimits(profiler::Profile& p, const ProfileLimits& limits) {
  LimitReport r;
  for (symbolizer::Frame& f : p.frames) {
    if (f.name.size() > limits.max_name_length) f.name.resize(limits.max_name_length);
    if (f.system_name.size() > limits.max_name_length) f.system_name.resize(limits.max_name_length);
    if (f.file.size() > limits.max_name_length) f.file.resize(limits.max_name_length);
  }
  for (profiler::Sample& s : p.samples) {
    if (s.frames.size() > limits.max_depth) {
      // Keep the leaf side, as Pyroscope would: that is where memory is held.
      s.frames.erase(s.frames.begin(), s.frames.end() - static_cast<long>(limits.max_depth));
      r.truncated_stacks++;
    }
  }
  r.folded_samples += FoldTo(p, limits.max_samples);
  // Size: fold harder until the serialized profile fits.
  for (int round = 0; round < 32 && SerializePprof(p).size() > limits.max_bytes && p.samples.size() > 1; round++)
    r.folded_samples += FoldTo(p, std::max<size_t>(1, p.samples.size() / 2));
  return r;
}

}  // namespace gpuflame::exporters
