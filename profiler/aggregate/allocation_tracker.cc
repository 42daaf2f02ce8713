#include "profiler/aggregate/allocation_tracker.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "base/saturating.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {
namespace {

// Sizes come from the profiled process (a tensor batch is its own bytes):
// an absurd one saturates a counter rather than overflow it (found by the
// record fuzzer). No real allocation comes near either bound.
constexpr uint64_t kMaxBytes = uint64_t{1} << 62;
int64_t Bytes(uint64_t v) { return static_cast<int64_t>(v > kMaxBytes ? kMaxBytes : v); }
using base::SaturatingAdd;
void Add(int64_t& to, int64_t v) { SaturatingAdd(to, v); }

// MurmurHash3's 64-bit finaliser: every input bit moves every output bit.
uint64_t Mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

}  // namespace

AllocationTracker::LiveTable& AllocationTracker::LiveOf(uint32_t pid) {
  if (cached_ && cached_pid_ == pid) return *cached_;
  auto& slot = live_[pid];
  if (!slot) slot = std::make_unique<LiveTable>();
  cached_pid_ = pid;
  cached_ = slot.get();
  return *slot;
}

AllocationTracker::LiveTable* AllocationTracker::FindLive(uint32_t pid) {
  if (cached_ && cached_pid_ == pid) return cached_;
  auto it = live_.find(pid);
  if (it == live_.end()) return nullptr;
  cached_pid_ = pid;
  cached_ = it->second.get();
  return cached_;
}

void AllocationTracker::ChangeInUse(StackId stack, const Key& key, int64_t objects, int64_t bytes, uint64_t ts_ns) {
  StackCounters& c = counters_[stack];
  peaks_.Change(stack, key.pid, key.at.domain, c.inuse_objects, c.inuse_bytes, objects, bytes, ts_ns);
  Add(c.inuse_objects, objects);
  Add(c.inuse_bytes, bytes);
}

void AllocationTracker::Release(const Live& live, const Key& key, uint64_t ts_ns) {
  ChangeInUse(live.stack, key, -live.objects, -Bytes(live.bytes), ts_ns);
  if (key.at.domain == GF_DOMAIN_GPU && !key.at.handle)
    ChangeUnused(slack_.RemoveSegment(key.pid, key.at.addr, live.segment));
  else if (key.at.domain == GF_DOMAIN_TORCH)
    ApplySlack([&](auto& changes) { slack_.RemoveBlock(key.pid, key.at.addr, live.bytes, live.segment, changes); });
}

void AllocationTracker::ChangeUnused(const SlackChange& change) {
  if (!change.any() || change.stack >= counters_.size()) return;
  StackCounters& c = counters_[change.stack];
  Add(c.unused_objects, change.objects);
  Add(c.unused_bytes, change.bytes);
}

uint32_t AllocationTracker::TrackSlack(const Key& key, uint64_t bytes, StackId stack) {
  uint32_t id = 0;
  if (key.at.domain == GF_DOMAIN_GPU && !key.at.handle) {
    ApplySlack([&](auto& changes) {
      SlackChange added;
      id = slack_.AddSegment(key.pid, key.at.addr, bytes, stack, added, changes);
      changes.push_back(added);
    });
  } else if (key.at.domain == GF_DOMAIN_TORCH) {
    ApplySlack([&](auto& changes) { id = slack_.AddBlock(key.pid, key.at.addr, bytes, changes); });
  }
  return id;
}

void AllocationTracker::OnMap(pid_t pid, uint64_t va, uint64_t size, uint64_t handle, uint64_t ts_ns) {
  if (FrozenAt(pid, ts_ns)) return;
  const Key chunk = KeyOf(pid, GF_DOMAIN_GPU, true, handle);
  LiveTable* live = FindLive(chunk.pid);
  auto it = live ? live->find(chunk.at) : LiveTable::iterator{};
  if (!live || it == live->end()) {
    stats_.maps_of_unknown_handles++;  // created before gpuflame attached: no stack to charge
    return;
  }
  const StackId stack = it->second.stack;
  ApplySlack([&](auto& changes) { slack_.AddMapped(chunk.pid, va, size, stack, changes); });
}

void AllocationTracker::OnUnmap(pid_t pid, uint64_t va, uint64_t size, uint64_t ts_ns) {
  if (FrozenAt(pid, ts_ns)) return;
  ApplySlack([&](auto& changes) { slack_.RemoveMapped(static_cast<uint32_t>(pid), va, size, changes); });
}

size_t AllocationTracker::Remember(absl::flat_hash_map<Key, uint64_t>& pending, const Key& key, uint64_t ts_ns) {
  size_t forgotten = 0;
  if (pending.size() >= kMaxPending) {
    forgotten = absl::erase_if(pending, [&](const auto& kv) { return kv.second + kPendingNs < ts_ns; });
    if (pending.size() >= kMaxPending) {  // a flood: forget rather than grow
      forgotten += pending.size();
      pending.clear();
    }
  }
  pending[key] = ts_ns;
  return forgotten;
}

bool AllocationTracker::FreedAlready(absl::flat_hash_map<Key, uint64_t>& pending, const Key& key, uint64_t ts_ns) {
  if (pending.empty()) return false;
  auto freed = pending.find(key);
  if (freed == pending.end() || freed->second < ts_ns) return false;
  pending.erase(freed);
  return true;
}

void AllocationTracker::OnAlloc(pid_t pid, uint8_t domain, bool handle, uint64_t addr,
                                uint64_t size, StackId stack, uint64_t stands_for, uint64_t ts_ns) {
  if (stack >= counters_.size()) counters_.resize(stack + 1);
  stats_.allocs++;
  const uint64_t bytes = stands_for ? stands_for : size;
  // Objects per allocation are stands_for / size, an integer for pprof:
  // rounded up with probability equal to the fraction, so that the count
  // stays unbiased however close the size is to the interval (a 3 MiB
  // block taken for 4 MiB counts 1 or 2, 1.33 on average). The draw is a
  // hash of the allocation itself: the same records give the same profile.
  int64_t objects = 1;
  if (stands_for && size && stands_for != size) {
    stats_.sampled_allocs++;
    const uint64_t draw = Mix(addr ^ ts_ns ^ (size * 0x9e3779b97f4a7c15ull)) % size;
    objects = std::max<int64_t>(1, Bytes(stands_for / size + (draw < stands_for % size ? 1 : 0)));
  }
  StackCounters& c = counters_[stack];
  Add(c.alloc_objects, objects);
  Add(c.alloc_bytes, Bytes(bytes));
  c.alloc_samples += 1;
  Add(c.observed_bytes, Bytes(size));
  const Key key = KeyOf(pid, domain, handle, addr);
  // Its free was lost and came first: it was freed already (and was never
  // in use as far as anything here can tell).
  if (ts_ns && (FreedAlready(lost_frees_, key, ts_ns) || FreedAlready(lost_unsampled_frees_, key, ts_ns))) return;
  auto [it, inserted] = LiveOf(key.pid).try_emplace(key.at, Live{bytes, objects, stack, 0, ts_ns});
  if (!inserted) {
    stats_.replaced_live++;
    Release(it->second, key, ts_ns);
    it->second = Live{bytes, objects, stack, 0, ts_ns};
  }
  ChangeInUse(stack, key, objects, Bytes(bytes), ts_ns);
  it->second.segment = TrackSlack(key, bytes, stack);
}

void AllocationTracker::AddLostAllocated(StackId stack, int64_t objects, int64_t bytes) {
  if (stack >= counters_.size()) counters_.resize(stack + 1);
  Add(counters_[stack].alloc_objects, objects);
  Add(counters_[stack].alloc_bytes, bytes);
}

void AllocationTracker::SetInUse(pid_t pid, uint8_t domain, StackId stack, int64_t objects, int64_t bytes,
                                 uint64_t ts_ns) {
  if (stack >= counters_.size()) counters_.resize(stack + 1);
  const StackCounters& c = counters_[stack];
  ChangeInUse(stack, KeyOf(pid, domain, false, 0), objects - c.inuse_objects, bytes - c.inuse_bytes, ts_ns);
}

void AllocationTracker::OnLostAlloc(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t size,
                                    int64_t objects, StackId stack, uint64_t ts_ns) {
  if (stack >= counters_.size()) counters_.resize(stack + 1);
  stats_.lost_allocs++;
  const Key key = KeyOf(pid, domain, handle, addr);
  // Its free arrived before it (a free of nothing, then): they pair up.
  if (auto freed = unmatched_frees_.find(key); freed != unmatched_frees_.end() && freed->second >= ts_ns) {
    unmatched_frees_.erase(freed);
    if (stats_.unmatched_frees) stats_.unmatched_frees--;
    return;
  }
  if (auto freed = unsampled_frees_.find(key); freed != unsampled_frees_.end() && freed->second >= ts_ns) {
    unsampled_frees_.erase(freed);
    if (stats_.unsampled_frees) stats_.unsampled_frees--;
    return;
  }
  // Its free was lost too and was taken out of the map first.
  if (FreedAlready(lost_frees_, key, ts_ns) || FreedAlready(lost_unsampled_frees_, key, ts_ns)) return;
  LiveTable& live = LiveOf(key.pid);
  auto it = live.find(key.at);
  // A later allocation at the address is live: this one was freed before
  // it (by a free lost beyond the map's reach, or replaced).
  if (it != live.end() && it->second.ts_ns > ts_ns) return;
  if (it != live.end()) {
    stats_.replaced_live++;
    Release(it->second, key, ts_ns);
    live.erase(it);
  }
  objects = std::max<int64_t>(objects, 1);
  ChangeInUse(stack, key, objects, Bytes(size), ts_ns);
  live.emplace(key.at, Live{size, objects, stack, TrackSlack(key, size, stack), ts_ns});
}

void AllocationTracker::OnLostFree(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t ts_ns,
                                   bool maybe_unsampled) {
  stats_.lost_frees++;
  if (!frozen_.empty()) {
    auto frozen = frozen_.find(static_cast<uint32_t>(pid));
    if (frozen != frozen_.end() && ts_ns >= frozen->second) return;
  }
  const Key key = KeyOf(pid, domain, handle, addr);
  LiveTable* live = FindLive(key.pid);
  auto it = live ? live->find(key.at) : LiveTable::iterator{};
  const bool found = live && it != live->end();
  if (found && it->second.ts_ns <= ts_ns) {
    Release(it->second, key, ts_ns);
    live->erase(it);
    return;
  }
  // Not live yet (its allocation is still in the ring behind us), or a
  // later one is: only an allocation older than the free may take it.
  if (found) return;
  if (maybe_unsampled) Remember(lost_unsampled_frees_, key, ts_ns);
  else stats_.lost_frees_forgotten += Remember(lost_frees_, key, ts_ns);
}

void AllocationTracker::OnFree(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t ts_ns,
                               bool maybe_unsampled) {
  stats_.frees++;
  if (!frozen_.empty()) {
    auto frozen = frozen_.find(static_cast<uint32_t>(pid));
    if (frozen != frozen_.end() && ts_ns >= frozen->second) {
      stats_.shutdown_frees++;
      return;
    }
  }
  const Key key = KeyOf(pid, domain, handle, addr);
  LiveTable* live = FindLive(key.pid);
  auto it = live ? live->find(key.at) : LiveTable::iterator{};
  if (!live || it == live->end()) {
    if (maybe_unsampled) {
      // Most frees of a sampled run: apart, so that unmatched_frees keeps
      // meaning "allocated before gpuflame attached".
      stats_.unsampled_frees++;
      Remember(unsampled_frees_, key, ts_ns);
      return;
    }
    stats_.unmatched_frees++;
    Remember(unmatched_frees_, key, ts_ns);
    return;
  }
  Release(it->second, key, ts_ns);
  live->erase(it);
}

size_t AllocationTracker::live_count() const {
  size_t n = 0;
  for (const auto& [pid, table] : live_) n += table->size();
  return n;
}

std::vector<pid_t> AllocationTracker::PidsWithLiveAllocations() const {
  std::vector<pid_t> pids;
  for (const auto& [pid, table] : live_)
    if (!table->empty()) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

void AllocationTracker::OnProcessExit(pid_t pid) {
  const auto upid = static_cast<uint32_t>(pid);
  if (cached_pid_ == upid) cached_ = nullptr;
  live_.erase(upid);
  slack_.ForgetProcess(upid);
  auto of = [upid](const auto& kv) { return kv.first.pid == upid; };
  if (!unmatched_frees_.empty()) absl::erase_if(unmatched_frees_, of);
  if (!unsampled_frees_.empty()) absl::erase_if(unsampled_frees_, of);
  if (!lost_frees_.empty()) absl::erase_if(lost_frees_, of);
  if (!lost_unsampled_frees_.empty()) absl::erase_if(lost_unsampled_frees_, of);
  frozen_.erase(static_cast<uint32_t>(pid));
}

void AllocationTracker::ForgetStacks(const std::vector<StackId>& stacks) {
  for (StackId id : stacks)
    if (id < counters_.size()) counters_[id] = StackCounters{};
  peaks_.ForgetStacks(stacks);
}

std::vector<StackCounters> AllocationTracker::CountersWithPeaks(PeakScope scope) const {
  std::vector<StackCounters> out = counters_;
  for (StackId id = 0; id < out.size(); id++) {
    StackCounters& c = out[id];
    std::tie(c.peak_objects, c.peak_bytes) = peaks_.AtPeak(id, c.inuse_objects, c.inuse_bytes, scope);
  }
  return out;
}

size_t AllocationTracker::MemoryUsage() const {
  // flat_hash_map: one slot per bucket plus one control byte.
  size_t live = live_.capacity() * (sizeof(std::pair<uint32_t, std::unique_ptr<LiveTable>>) + 1);
  for (const auto& [pid, table] : live_) live += sizeof(LiveTable) + table->capacity() * (sizeof(std::pair<AddrKey, Live>) + 1);
  return live +
         (unmatched_frees_.capacity() + unsampled_frees_.capacity() + lost_frees_.capacity() +
          lost_unsampled_frees_.capacity()) *
             (sizeof(std::pair<Key, uint64_t>) + 1) +
         counters_.capacity() * sizeof(StackCounters) + peaks_.MemoryUsage() + slack_.MemoryUsage();
}

}  // namespace gpuflame::profiler
