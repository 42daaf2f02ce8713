#include "profiler/aggregate/profile_builder.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/saturating.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

SampleMaker::SampleMaker(StackSource source, const absl::flat_hash_map<pid_t, std::string>& comm, Profile& p)
    : source_(source), comm_(comm), p_(p), remap_(source.frames.size(), -1) {}

Sample SampleMaker::Labelled(pid_t pid) const {
  Sample s;
  s.labels.push_back({"pid", "", pid});
  if (auto it = comm_.find(pid); it != comm_.end() && !it->second.empty())
    s.labels.push_back({"process", it->second, 0});
  return s;
}

Sample SampleMaker::Make(const StackInfo& stack) {
  Sample s = Labelled(stack.pid);
  for (FrameId f : stack.frames) {
    if (remap_[f] < 0) {
      remap_[f] = static_cast<int64_t>(p_.frames.size());
      p_.frames.push_back(source_.frames.Get(f));
    }
    s.frames.push_back(static_cast<uint32_t>(remap_[f]));
  }
  return s;
}

Profile BuildMemoryProfile(StackSource source, const std::vector<StackCounters>& counters, uint8_t domain,
                           const absl::flat_hash_map<pid_t, std::string>& comm, std::optional<pid_t> pid,
                           int64_t time_nanos, int64_t duration_nanos) {
  Profile p;
  p.name = domain == GF_DOMAIN_TORCH ? kTorchMemoryProfile : kGpuMemoryProfile;
  p.sample_types = {{"alloc_objects", "count"}, {"alloc_space", "bytes"},  {"inuse_objects", "count"},
                    {"inuse_space", "bytes"},   {"peak_objects", "count"}, {"peak_space", "bytes"}};
  // Device level: the caching allocator's slack by the stack that made each
  // segment (segment_slack.h).
  const bool slack = domain == GF_DOMAIN_GPU;
  if (slack) p.sample_types.insert(p.sample_types.end(), {{"unused_objects", "count"}, {"unused_space", "bytes"}});
  p.default_sample_type = "inuse_space";
  p.period_type = {"space", "bytes"};
  p.period = 1;  // every allocation is recorded: no sampling
  p.time_nanos = time_nanos;
  p.duration_nanos = duration_nanos;
  auto wanted = [&](StackId id) {
    const StackInfo& stack = source.stacks.Get(id);
    const StackCounters& c = counters[id];
    return stack.domain == domain &&
           (c.alloc_objects != 0 || c.inuse_objects != 0 || c.inuse_bytes != 0 || c.peak_bytes != 0 ||
            c.unused_bytes != 0) &&
           (!pid || stack.pid == *pid);
  };
  // Where tensor allocations were sampled by bytes (by the library in the
  // process, or by the probes over budget), the values are estimates; what
  // was seen is in the profile itself (alloc_samples).
  int64_t estimated_bytes = 0, observed_bytes = 0;
  bool estimated = false;
  for (StackId id = 0; id < source.stacks.size() && id < counters.size(); id++) {
    if (!wanted(id)) continue;
    // A sampled allocation counts other bytes than its own, and mostly
    // another number of objects (not always: 3 MiB taken for 4 MiB may count 1).
    estimated |= counters[id].alloc_samples != counters[id].alloc_objects ||
                 counters[id].observed_bytes != counters[id].alloc_bytes;
    base::SaturatingAdd(estimated_bytes, counters[id].alloc_bytes);
    base::SaturatingAdd(observed_bytes, counters[id].observed_bytes);
  }
  if (estimated) {
    p.sample_types.push_back({"alloc_samples", "count"});
    p.comments.push_back(absl::StrFormat(
        "gpuflame: tensor allocations sampled by bytes: %.1f%% of the bytes allocated observed; "
        "values are unbiased estimates (alloc_samples: allocations seen)",
        estimated_bytes > 0 ? 100.0 * static_cast<double>(observed_bytes) / static_cast<double>(estimated_bytes)
                            : 0.0));
  }
  SampleMaker make(source, comm, p);
  for (StackId id = 0; id < source.stacks.size() && id < counters.size(); id++) {
    if (!wanted(id)) continue;
    const StackCounters& c = counters[id];
    Sample s = make.Make(source.stacks.Get(id));
    s.values = {c.alloc_objects, c.alloc_bytes, c.inuse_objects, c.inuse_bytes, c.peak_objects, c.peak_bytes};
    if (slack) s.values.insert(s.values.end(), {c.unused_objects, c.unused_bytes});
    if (estimated) s.values.push_back(c.alloc_samples);
    p.samples.push_back(std::move(s));
  }
  return p;
}

std::string DescribePeak(const PeakSummary& peak, PeakScope scope) {
  return absl::StrFormat(
      "peak_objects/peak_space are the live set when this process's in use was highest %s: %.1f MiB%s",
      scope == PeakScope::kWindow ? "in this window" : "while recorded", static_cast<double>(peak.bytes) / (1 << 20),
      peak.all_time_in_window ? " (its highest since gpuflame attached)" : "");
}

Profile BuildTimeProfile(StackSource source, const TimeTracker& tracker, int64_t period_ns,
                         const absl::flat_hash_map<TimeKey, TimeCounters>& counters, TimeKind kind,
                         const absl::flat_hash_map<pid_t, std::string>& comm, std::optional<pid_t> pid,
                         int64_t time_nanos, int64_t duration_nanos) {
  Profile p;
  p.time_nanos = time_nanos;
  p.duration_nanos = duration_nanos;
  if (kind == TimeKind::kCpu) {
    // Pyroscope's process_cpu:cpu:nanoseconds:cpu:nanoseconds.
    p.name = kCpuProfile;
    p.sample_types = {{"cpu", "nanoseconds"}};
    p.default_sample_type = "cpu";
    p.period_type = {"cpu", "nanoseconds"};
    p.period = period_ns;
  } else {
    p.name = kGpuKernelProfile;
    p.sample_types = {{"time", "nanoseconds"}, {"launches", "count"}};
    p.default_sample_type = "time";
    p.period_type = {"time", "nanoseconds"};
    p.period = 1;  // every kernel's time is counted (stacks are what is sampled)
  }
  // Where CUPTI activity was duty-cycled, time and launches are estimates,
  // scaled from what was seen; the time seen goes beside them, so that the
  // share observed is in the profile itself (observed_time / time).
  bool estimated = false;
  if (kind == TimeKind::kGpuKernel)
    for (const auto& [key, c] : counters) estimated |= c.observed_nanos != c.nanos;
  if (estimated) {
    p.sample_types.push_back({"observed_time", "nanoseconds"});
    int64_t seen = 0, total = 0;
    for (const auto& [key, c] : counters) {
      if (pid && key.stack < source.stacks.size() && source.stacks.Get(key.stack).pid != *pid) continue;
      seen += c.observed_nanos;
      total += c.nanos;
    }
    p.comments.push_back(absl::StrFormat(
        "gpuflame: kernel time estimated from duty-cycled CUPTI activity: %.1f%% of it observed, scaled up",
        total ? 100.0 * static_cast<double>(seen) / static_cast<double>(total) : 0.0));
  }
  SampleMaker make(source, comm, p);
  // Stable output: by stack, then label.
  std::vector<std::pair<TimeKey, TimeCounters>> sorted(counters.begin(), counters.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.first.stack != b.first.stack ? a.first.stack < b.first.stack : a.first.label < b.first.label;
  });
  for (const auto& [key, c] : sorted) {
    if (key.stack >= source.stacks.size() || (c.count == 0 && c.nanos == 0)) continue;
    const StackInfo& stack = source.stacks.Get(key.stack);
    if (pid && stack.pid != *pid) continue;
    Sample s = make.Make(stack);
    s.values = kind == TimeKind::kCpu ? std::vector<int64_t>{c.nanos} : std::vector<int64_t>{c.nanos, c.count};
    if (estimated) s.values.push_back(c.observed_nanos);
    if (key.label != 0) s.labels.push_back({"thread_name", tracker.label(key.label), 0});
    p.samples.push_back(std::move(s));
  }
  return p;
}

}  // namespace gpuflame::profiler
