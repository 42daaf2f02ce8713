#include "profiler/utilization/idle_profile.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"

namespace gpuflame::profiler::utilization {

Profile BuildIdleProfile(StackSource source, const IdleJoin& join, const absl::flat_hash_map<pid_t, std::string>& comm,
                         int64_t time_nanos, int64_t duration_nanos) {
  Profile p;
  p.name = kGpuIdleProfile;
  p.sample_types = {{"idle", "nanoseconds"}};
  p.default_sample_type = "idle";
  p.period_type = {"idle", "nanoseconds"};
  p.period = 1;  // every idle gap's time is charged: the CPU stacks are what is sampled
  p.time_nanos = time_nanos;
  p.duration_nanos = duration_nanos;
  p.comments.push_back(
      "gpuflame: each idle gap's time (a GPU of the process idle for the gap threshold or more) shared evenly among "
      "the CPU samples of the process's threads taken during it");
  if (join.gaps_unaligned)
    p.comments.push_back(absl::StrFormat(
        "gpuflame: %d idle gaps (%.1f ms) could not be put on the CPU samples' clock (no clock pair of their process) "
        "and are not in this profile",
        join.gaps_unaligned, static_cast<double>(join.unaligned_ns) / 1e6));
  if (join.samples_dropped)
    p.comments.push_back(
        absl::StrFormat("gpuflame: %d CPU samples were past the join's limit: gaps after them may show under %s",
                        join.samples_dropped, kNoThreadOnCpuFrame));
  std::vector<std::pair<IdleCharge, uint64_t>> sorted(join.ns.begin(), join.ns.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    const IdleCharge &x = a.first, &y = b.first;
    return std::tie(x.pid, x.device, x.start_up, x.stack) < std::tie(y.pid, y.device, y.start_up, y.stack);
  });
  SampleMaker make(source, comm, p);
  // A marker frame, made once: |index| caches where it is.
  auto marker = [&p](int64_t& index, const char* name) {
    if (index < 0) {
      index = static_cast<int64_t>(p.frames.size());
      symbolizer::Frame f;
      f.kind = symbolizer::FrameKind::kMarker;
      f.name = name;
      p.frames.push_back(f);
    }
    return static_cast<uint32_t>(index);
  };
  int64_t no_thread = -1, start_up = -1;
  for (const auto& [charge, ns] : sorted) {
    Sample s;
    if (charge.stack != StackTable::kNone && charge.stack < source.stacks.size()) {
      s = make.Make(source.stacks.Get(charge.stack));
    } else {
      s = make.Labelled(charge.pid);
      s.frames.push_back(marker(no_thread, kNoThreadOnCpuFrame));
    }
    // The start-up's idle time under a root of its own: the steady state's
    // stacks, which the verdict is about, are not buried under model
    // loading and compiling.
    if (charge.start_up) s.frames.insert(s.frames.begin(), marker(start_up, kStartUpFrame));
    s.values = {static_cast<int64_t>(ns)};
    s.labels.push_back({"gpu", "", static_cast<int64_t>(charge.device)});
    s.labels.push_back({"phase", charge.start_up ? "start-up" : "steady", 0});
    p.samples.push_back(std::move(s));
  }
  return p;
}

}  // namespace gpuflame::profiler::utilization
