// Out-of-memory episodes: from the event loop's records to captures
// (oom_capture.h) of what a process held when its allocation failed.
//
// An episode opens at a process's first device allocation call that returns
// out of memory (GF_EV_ALLOC_FAILED), or at PyTorch's report if no failed
// call came before it (its per-process memory fraction refuses without
// one). PyTorch then frees cached segments and retries, twice at most:
// those calls belong to the episode, which ends when a retry succeeds (a
// device allocation on the failing thread) or PyTorch reports the OOM and
// raises (GF_EV_OOM_REPORT). What is kept is the state at the first failure:
//  - device level: the process's live set by stack, taken at once (device
//    records come through the ring in order);
//  - tensor level: in-process tensor events arrive in batches up to 100 ms
//    late, so its live set is taken when the process's first tensor event
//    at or after the failure arrives (before it is applied), at PyTorch's
//    report (in-process it comes in the same stream, after every event made
//    before it), at the process's exit, or when the episode is given up;
//  - the caching allocator's totals, with the tensor level.
// A capture is handed out (Take) once the outcome and both live sets are
// known, kExitGraceNs after the process exited (a report may trail its exit
// record, which comes through another ring), or kSettleNs after the failure.
//
// Cost: none per event while no episode is open (one comparison for each
// tensor event and successful device allocation). Bounded: at most
// kMaxCapturesPerProcess captures per process, kMaxOpen episodes open and
// kMaxWaiting captures not yet taken; past those, episodes are counted
// (stats().not_captured), not captured.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_FORENSICS_OOM_EPISODES_H_
#define GPUFLAME_PROFILER_FORENSICS_OOM_EPISODES_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/allocation_tracker.h"
#include "profiler/forensics/oom_capture.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

struct OomStats {
  uint64_t episodes = 0;       // out-of-memory episodes seen
  uint64_t failed_calls = 0;   // device allocation calls that returned out of memory, retries included
  uint64_t torch_reports = 0;  // PyTorch's reports (each followed by an OutOfMemoryError)
  uint64_t captured = 0;       // episodes captured (handed out by Take)
  uint64_t not_captured = 0;   // episodes only counted: over the bounds above
  // Captured episodes by how they ended.
  uint64_t retry_succeeded = 0;
  uint64_t raised = 0;
  uint64_t exited = 0;
  uint64_t unresolved = 0;
};

class OomEpisodes {
 public:
  static constexpr uint64_t kSettleNs = 2'000'000'000;
  static constexpr uint64_t kExitGraceNs = 200'000'000;
  static constexpr uint32_t kMaxCapturesPerProcess = 8;
  static constexpr size_t kMaxOpen = 256;
  static constexpr size_t kMaxWaiting = 64;

  // Who a process is (read when its episode opens); the allocator's totals
  // of a process now, if it has reported any.
  using ContextFn = std::function<OomProcessContext(pid_t)>;
  using TotalsFn = std::function<std::optional<OomAllocatorTotals>(pid_t)>;

  // |stacks| and |tracker| are the event loop's: live sets are read there.
  OomEpisodes(const StackTable& stacks, const AllocationTracker& tracker) : stacks_(stacks), tracker_(tracker) {}
  void SetContext(ContextFn context) { context_ = std::move(context); }
  void SetTotals(TotalsFn totals) { totals_ = std::move(totals); }

  // A device allocation call returned out of memory (|stack|: its stack, as
  // an allocation's would be).
  void OnAllocFailed(pid_t pid, uint32_t tid, uint64_t ts_ns, uint16_t api, uint64_t bytes, uint32_t error,
                     StackId stack);
  // PyTorch's report (|report|'s frames are taken from |stack|).
  void OnTorchReport(pid_t pid, OomTorchReport report, StackId stack);
  // A device allocation succeeded.
  void OnDeviceAlloc(pid_t pid, uint32_t tid, uint64_t ts_ns) {
    if (!open_.empty()) RetrySucceeded(pid, tid, ts_ns);
  }
  // A tensor event of |pid| made at |ts_ns| is about to be applied.
  void BeforeTensorEvent(pid_t pid, uint64_t ts_ns) {
    if (awaiting_tensors_ != 0) CatchUp(pid, ts_ns);
  }
  // |pid| exited (its exit record, or found gone): before its live set goes.
  void OnProcessExit(pid_t pid, uint64_t ts_ns);
  // Ends the episodes whose time is up (CLOCK_MONOTONIC |now_ns|).
  void Tick(uint64_t now_ns);
  // Ends every open episode (the end of a recording).
  void FinishAll();
  // The captures ended since the last call, oldest first.
  std::vector<OomCapture> Take() { return std::exchange(done_, {}); }
  // |pids| are retired (their stack ids are about to mean others'): their
  // open episodes end now, and their counts go.
  void Forget(std::span<const pid_t> pids);
  const OomStats& stats() const { return stats_; }
  size_t open() const { return open_.size(); }

 private:
  struct Episode {
    OomCapture capture;
    uint64_t opened_ns = 0;  // the first failure
    uint64_t exited_ns = 0;  // 0: not exited
    bool capturing = false;  // within the bounds: its live sets are taken
    bool awaiting_tensors = false;
  };
  // Opens |pid|'s episode at |ts_ns|; null if too many are open.
  Episode* Open(pid_t pid, uint64_t ts_ns);
  void RetrySucceeded(pid_t pid, uint32_t tid, uint64_t ts_ns);
  void CatchUp(pid_t pid, uint64_t ts_ns);
  void TakeTensors(Episode& e);
  // Hands the episode out if it is complete (or |force|), and closes it.
  void EndIfComplete(uint32_t pid, bool force);
  OomLiveSet LiveSet(pid_t pid, uint8_t domain) const;
  std::vector<FrameId> FramesOf(StackId stack) const;

  const StackTable& stacks_;
  const AllocationTracker& tracker_;
  ContextFn context_;
  TotalsFn totals_;
  absl::flat_hash_map<uint32_t, Episode> open_;
  absl::flat_hash_map<uint32_t, uint32_t> episodes_of_;  // pid -> its episodes so far
  size_t awaiting_tensors_ = 0;                          // open episodes whose tensor live set is not taken yet
  std::vector<OomCapture> done_;
  OomStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_FORENSICS_OOM_EPISODES_H_
