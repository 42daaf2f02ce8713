#include "profiler/profile_builder.h"

#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

exporters::Profile BuildMemoryProfile(const EventProcessor& events,
                                      const std::vector<StackCounters>& counters, uint8_t domain,
                                      const absl::flat_hash_map<pid_t, std::string>& comm,
                                      std::optional<pid_t> pid, int64_t time_nanos,
                                      int64_t duration_nanos) {
  exporters::Profile p;
  p.name = domain == GF_DOMAIN_TORCH ? kTorchMemoryProfile : kGpuMemoryProfile;
  p.sample_types = {{"alloc_objects", "count"},
                    {"alloc_space", "bytes"},
                    {"inuse_objects", "count"},
                    {"inuse_space", "bytes"}};
  p.default_sample_type = "inuse_space";
  p.period_type = {"space", "bytes"};
  p.period = 1;  // every allocation is recorded: no sampling
  p.time_nanos = time_nanos;
  p.duration_nanos = duration_nanos;

  // Profile frames are the event loop's frames, re-indexed to those used.
  const FrameTable& frames = events.frames();
  std::vector<int64_t> remap(frames.size(), -1);
  for (StackId id = 0; id < events.stacks().size() && id < counters.size(); id++) {
    const StackInfo& stack = events.stacks().Get(id);
    const StackCounters& c = counters[id];
    if (stack.domain != domain || (c.alloc_objects == 0 && c.inuse_objects == 0)) continue;
    if (pid && stack.pid != *pid) continue;
    exporters::Sample s;
    for (FrameId f : stack.frames) {
      if (remap[f] < 0) {
        remap[f] = static_cast<int64_t>(p.frames.size());
        p.frames.push_back(frames.Get(f));
      }
      s.frames.push_back(static_cast<uint32_t>(remap[f]));
    }
    s.values = {c.alloc_objects, c.alloc_bytes, c.inuse_objects, c.inuse_bytes};
    s.labels.push_back({"pid", "", stack.pid});
    if (auto it = comm.find(stack.pid); it != comm.end() && !it->second.empty())
      s.labels.push_back({"process", it->second, 0});
    p.samples.push_back(std::move(s));
  }
  return p;
}

}  // namespace gpuflame::profiler
