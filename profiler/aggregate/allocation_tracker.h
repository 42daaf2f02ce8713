// Exact GPU-memory accounting: a live-allocation table keyed by (process,
// domain, device address or handle) and, per stack, what was allocated and
// what is still in use. Every byte an event reports is counted (a sampled
// tensor allocation as the bytes it stands for); frees that match nothing
// (memory allocated before gpuflame attached) are counted, not guessed. A process that exits keeps its live set at exit as "in use"; for
// Python, "exit" is when the interpreter starts shutting down (Py_FinalizeEx),
// since finalization frees every tensor and would leave nothing to see.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_AGGREGATE_ALLOCATION_TRACKER_H_
#define GPUFLAME_PROFILER_AGGREGATE_ALLOCATION_TRACKER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "profiler/aggregate/peak_tracker.h"
#include "profiler/aggregate/segment_slack.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

struct StackCounters {
  int64_t alloc_objects = 0;
  int64_t alloc_bytes = 0;
  int64_t inuse_objects = 0;
  int64_t inuse_bytes = 0;
  // What was seen of it: allocations taken and their own bytes (less than
  // the above where the library sampled by bytes and these stand for more).
  int64_t alloc_samples = 0;
  int64_t observed_bytes = 0;
  // In use at its process's peak (its domain's high-water mark): filled by
  // AllocationTracker::CountersWithPeaks, zero in counters().
  int64_t peak_objects = 0;
  int64_t peak_bytes = 0;
  // Device level, per segment-creating stack: the bytes of its live
  // segments that no live tensor block occupies, and how many of its
  // segments have some (segment_slack.h). Zero at tensor level.
  int64_t unused_objects = 0;
  int64_t unused_bytes = 0;
};

struct TrackerStats {
  uint64_t allocs = 0;
  uint64_t frees = 0;
  uint64_t unmatched_frees = 0;   // free of an address we never saw allocated
  uint64_t unsampled_frees = 0;   // free, while the probes sampled allocations, of one not taken
  uint64_t replaced_live = 0;     // alloc of an address already live (missed free)
  uint64_t shutdown_frees = 0;    // frees after the live set was frozen
  uint64_t sampled_allocs = 0;    // taken by sampling: each stands for more than itself
  // Records the ring buffer had no room for, kept by BPF without their stack
  // (bpf/gpuflame_abi.h, struct gf_lost_key): applied to the live set.
  uint64_t lost_allocs = 0;  // made live under the [lost] frame (or found freed already)
  uint64_t lost_frees = 0;   // applied to the allocation they freed (or to one still on its way)
  // Lost frees that waited for an allocation still on its way and were
  // forgotten (a flood filled the pending map): if it comes after all, it
  // stays in use. Those sent while the probes sampled are not counted: most
  // are of blocks never taken, which nothing will come for.
  uint64_t lost_frees_forgotten = 0;
  uint64_t maps_of_unknown_handles = 0;  // cuMemMap of a handle not live here: no segment
};

class AllocationTracker {
 public:
  // |stands_for|: the bytes a sampled allocation stands for (0: itself). It
  // counts as that many bytes and about stands_for / size objects, alive
  // until its own free.
  // |ts_ns| (CLOCK_MONOTONIC, 0: not known) orders it against lost frees.
  void OnAlloc(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t size, StackId stack,
               uint64_t stands_for = 0, uint64_t ts_ns = 0);
  // What was allocated and lost with its record: counted under |stack|
  // (alloc_* only; in use comes from OnLostAlloc, one by one).
  void AddLostAllocated(StackId stack, int64_t objects, int64_t bytes);
  // Sets |stack| (of |pid|, |domain|)'s in use outright: for a marker whose
  // size is known from elsewhere (the allocator's own totals, the driver),
  // not from allocations we saw.
  void SetInUse(pid_t pid, uint8_t domain, StackId stack, int64_t objects, int64_t bytes, uint64_t ts_ns = 0);
  // A lost allocation itself (address, the bytes and allocations it stands
  // for, time): live under |stack| until its free, unless its free came
  // already.
  void OnLostAlloc(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t size, int64_t objects, StackId stack,
                   uint64_t ts_ns);
  // A lost free: releases the allocation it freed (made before |ts_ns|),
  // or, if that one has not arrived yet, waits for it. |maybe_unsampled| as
  // for OnFree: it waits apart, so that a sampled run's many frees of blocks
  // never taken cannot push out the others.
  void OnLostFree(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t ts_ns, bool maybe_unsampled = false);
  // |ts_ns| is when the free happened (CLOCK_MONOTONIC), which may be before
  // records that arrived earlier: in-process tensor events come in batches.
  // |maybe_unsampled|: sent while the probes sampled allocations (past the
  // process's start-up, or GF_SHED_TENSOR_SAMPLED), or of a process whose allocations were so
  // sampled before: its block may never have been taken, so if none is live
  // it is counted apart from unmatched frees (a lost allocation still pairs
  // with it).
  void OnFree(pid_t pid, uint8_t domain, bool handle, uint64_t addr, uint64_t ts_ns, bool maybe_unsampled = false);
  // An expandable segment's chunk: physical memory |handle| (a live
  // cuMemCreate of |pid|) mapped at [va, va + size), and ranges unmapped.
  // Only the slack (unused_*) sees them: in use is the handle's.
  void OnMap(pid_t pid, uint64_t va, uint64_t size, uint64_t handle, uint64_t ts_ns);
  void OnUnmap(pid_t pid, uint64_t va, uint64_t size, uint64_t ts_ns);
  // Keeps the live set of |pid| at |ts_ns| as its final "in use": frees from
  // then on (interpreter teardown) are counted but not applied.
  void FreezeProcess(pid_t pid, uint64_t ts_ns) { frozen_.emplace(static_cast<uint32_t>(pid), ts_ns); }
  // Forgets the live table of an exited process; its counters stay.
  void OnProcessExit(pid_t pid);
  // After an exited process's last window: its stacks are retired (their
  // ids go to later stacks, see StackTable::Retire), so their counters
  // start again from zero.
  void ForgetStacks(const std::vector<StackId>& stacks);

  // Counters indexed by StackId (stacks with no events are zero).
  const std::vector<StackCounters>& counters() const { return counters_; }
  // A copy with peak_* filled: each stack's in use when its process's in
  // use in its domain was highest, over the run or the current window.
  std::vector<StackCounters> CountersWithPeaks(PeakScope scope) const;
  PeakSummary Peak(pid_t pid, uint8_t domain, PeakScope scope) const {
    return peaks_.Summary(static_cast<uint32_t>(pid), domain, scope);
  }
  // |pid|'s in use in |domain| now (what the timeline's counters plot).
  int64_t InUse(pid_t pid, uint8_t domain) const { return peaks_.InUse(static_cast<uint32_t>(pid), domain); }
  // A window starts (the agent): its peak starts from the live set now.
  void StartPeakWindow() { peaks_.StartWindow(); }
  // Exited processes after their last report: their peaks go.
  void ForgetPeaks(std::span<const pid_t> pids) {
    peaks_.ForgetProcesses(pids);
    for (pid_t pid : pids) slack_.Erase(static_cast<uint32_t>(pid));
  }
  const TrackerStats& stats() const { return stats_; }
  size_t live_count() const;
  // The processes that hold live allocations (one entry per process).
  std::vector<pid_t> PidsWithLiveAllocations() const;
  // Whether |pid|'s live set is frozen (FreezeProcess: its interpreter is
  // shutting down), so frees no longer change its in use.
  bool Frozen(pid_t pid) const { return frozen_.contains(static_cast<uint32_t>(pid)); }
  // Whether an event of |pid| at |ts_ns| comes after its live set froze
  // (its interpreter's teardown, whose frees are not applied).
  bool FrozenAt(pid_t pid, uint64_t ts_ns) const {
    auto it = frozen_.find(static_cast<uint32_t>(pid));
    return it != frozen_.end() && ts_ns >= it->second;
  }
  // |pid|'s segments, the tensor bytes in them and the blocks in none, now.
  SlackTotals Slack(pid_t pid) const { return slack_.Totals(static_cast<uint32_t>(pid)); }
  const SlackStats& slack_stats() const { return slack_.stats(); }
  size_t MemoryUsage() const;

 private:
  struct Live {
    uint64_t bytes;
    int64_t objects;
    StackId stack;
    uint32_t segment;  // SegmentSlack's id: of this segment, or of the one this block is charged to (0: none)
    uint64_t ts_ns;    // when it was allocated (0: not known)
  };
  // A process's live allocations, by (domain, handle, address): one table
  // per process, so that its exit drops one entry instead of walking every
  // process's allocations (a node's churn of short processes beside a
  // training job holding a million).
  struct AddrKey {
    uint64_t addr;
    uint8_t domain;
    uint8_t handle;
    bool operator==(const AddrKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const AddrKey& k) {
      return H::combine(std::move(h), k.addr, k.domain, k.handle);
    }
  };
  using LiveTable = absl::flat_hash_map<AddrKey, Live>;
  // An allocation's identity across processes (frees waiting for theirs).
  struct Key {
    AddrKey at;
    uint32_t pid;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.at, k.pid);
    }
  };
  static Key KeyOf(pid_t pid, uint8_t domain, bool handle, uint64_t addr) {
    return {{addr, domain, static_cast<uint8_t>(handle)}, static_cast<uint32_t>(pid)};
  }
  // |pid|'s table, made if absent; the last one asked for is at hand
  // (events come in runs from one process).
  LiveTable& LiveOf(uint32_t pid);
  LiveTable* FindLive(uint32_t pid);
  // Every change of a stack's in use goes through here (the peaks see it).
  void ChangeInUse(StackId stack, const Key& key, int64_t objects, int64_t bytes, uint64_t ts_ns);
  void Release(const Live& live, const Key& key, uint64_t ts_ns);
  // A live allocation is a segment (device level, at an address) or a
  // block in one (tensor level): its slack is accounted; returns the id it
  // keeps for its release.
  uint32_t TrackSlack(const Key& key, uint64_t bytes, StackId stack);
  void ChangeUnused(const SlackChange& change);
  // Runs |f| on a cleared scratch list of changes, then applies them.
  template <typename F>
  void ApplySlack(F&& f) {
    changes_.clear();
    f(changes_);
    for (const SlackChange& c : changes_) ChangeUnused(c);
  }
  // A free whose allocation is not (yet) live: kept a while (by time, and at
  // most kMaxPending of them) so that a lost record arriving later pairs up.
  // Returns how many were forgotten to make room (a flood).
  static size_t Remember(absl::flat_hash_map<Key, uint64_t>& pending, const Key& key, uint64_t ts_ns);
  // Whether a lost free in |pending| took the allocation |key| made at
  // |ts_ns| (it came before it): the entry goes.
  static bool FreedAlready(absl::flat_hash_map<Key, uint64_t>& pending, const Key& key, uint64_t ts_ns);
  static constexpr size_t kMaxPending = 65536;
  static constexpr uint64_t kPendingNs = 30'000'000'000;

  absl::flat_hash_map<uint32_t, std::unique_ptr<LiveTable>> live_;
  uint32_t cached_pid_ = 0;
  LiveTable* cached_ = nullptr;  // live_[cached_pid_], or null
  absl::flat_hash_map<Key, uint64_t> unmatched_frees_;  // -> when freed (a lost allocation may pair up)
  absl::flat_hash_map<Key, uint64_t> unsampled_frees_;  // the same, for frees counted as unsampled
  absl::flat_hash_map<Key, uint64_t> lost_frees_;       // -> when freed (its allocation may be on its way)
  absl::flat_hash_map<Key, uint64_t> lost_unsampled_frees_;  // the same, sent while the probes sampled
  absl::flat_hash_map<uint32_t, uint64_t> frozen_;  // pid -> when its live set froze
  std::vector<StackCounters> counters_;
  PeakTracker peaks_;
  SegmentSlack slack_;
  std::vector<SlackChange> changes_;  // scratch for ApplySlack
  TrackerStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_ALLOCATION_TRACKER_H_
