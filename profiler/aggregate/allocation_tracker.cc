#include "profiler/aggregate/allocation_tracker.h"

#include <algorithm>

namespace gpuflame::profiler {

void AllocationTracker::Release(const Live& live) {
  StackCounters& c = counters_[live.stack];
  c.inuse_objects -= live.objects;
  c.inuse_bytes -= static_cast<int64_t>(live.bytes);
}

void AllocationTracker::OnAlloc(pid_t pid, uint8_t domain, bool handle, uint64_t addr,
                                uint64_t size, StackId stack, uint64_t stands_for) {
  if (stack >= counters_.size()) counters_.resize(stack + 1);
  stats_.allocs++;
  const uint64_t bytes = stands_for ? stands_for : size;
  // Objects rounded per allocation (pprof values are integers): unbiased
  // where sizes are small against the interval, as most sampled ones are.
  int64_t objects = 1;
  if (stands_for && size && stands_for != size) {
    stats_.sampled_allocs++;
    objects = std::max<int64_t>(1, static_cast<int64_t>((stands_for + size / 2) / size));
  }
  StackCounters& c = counters_[stack];
  c.alloc_objects += objects;
  c.alloc_bytes += static_cast<int64_t>(bytes);
  c.inuse_objects += objects;
  c.inuse_bytes += static_cast<int64_t>(bytes);
  c.alloc_samples += 1;
  c.observed_bytes += static_cast<int64_t>(size);
  Key key{addr, static_cast<uint32_t>(pid), domain, static_cast<uint8_t>(handle)};
  auto [it, inserted] = live_.try_emplace(key, Live{bytes, objects, stack});
  if (!inserted) {
    stats_.replaced_live++;
    Release(it->second);
    it->second = Live{bytes, objects, stack};
  }
}

void AllocationTracker::OnFree(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t ts_ns) {
  stats_.frees++;
  if (!frozen_.empty()) {
    auto frozen = frozen_.find(static_cast<uint32_t>(pid));
    if (frozen != frozen_.end() && ts_ns >= frozen->second) {
      stats_.shutdown_frees++;
      return;
    }
  }
  auto it = live_.find(Key{addr, static_cast<uint32_t>(pid), domain, static_cast<uint8_t>(handle)});
  if (it == live_.end()) {
    stats_.unmatched_frees++;
    return;
  }
  Release(it->second);
  live_.erase(it);
}

void AllocationTracker::OnProcessExit(pid_t pid) {
  absl::erase_if(live_, [pid](const auto& kv) { return kv.first.pid == static_cast<uint32_t>(pid); });
  frozen_.erase(static_cast<uint32_t>(pid));
}

void AllocationTracker::ClearInUse(const std::vector<StackId>& stacks) {
  for (StackId id : stacks) {
    if (id >= counters_.size()) continue;
    counters_[id].inuse_objects = 0;
    counters_[id].inuse_bytes = 0;
  }
}

size_t AllocationTracker::MemoryUsage() const {
  // flat_hash_map: one slot per bucket plus one control byte.
  return live_.capacity() * (sizeof(std::pair<Key, Live>) + 1) +
         counters_.capacity() * sizeof(StackCounters);
}

}  // namespace gpuflame::profiler
