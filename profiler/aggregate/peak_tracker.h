// The live set by stack at each process's high-water mark, per domain
// (device level, tensor level), exactly and without an event log.
//
// A snapshot of every stack at each new maximum would cost O(stacks) per
// event while memory grows (all of a model's loading). Instead each stack
// keeps the value it had at the last maximum only once it changes after
// it: a maximum bumps its scope's epoch, and a stack whose saved epoch is
// older has not changed since, so its current value is its value at the
// peak. O(1) per in-use change, 40 bytes per stack. Two scopes run side by
// side: the whole run (`record`) and the current window (the agent), which
// restarts at each window's start from the live set at that instant.
// Not thread-safe: event loop only (the AllocationTracker calls it).
#ifndef GPUFLAME_PROFILER_AGGREGATE_PEAK_TRACKER_H_
#define GPUFLAME_PROFILER_AGGREGATE_PEAK_TRACKER_H_

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

enum class PeakScope { kAllTime, kWindow };

// One process's peak in one domain.
struct PeakSummary {
  int64_t bytes = 0;         // the high-water mark of in use: the peak stacks' sum
  uint64_t ts_ns = 0;        // CLOCK_MONOTONIC when it was reached (0: not known)
  bool all_time_in_window = false;  // kWindow: the process's all-time peak was reached in this window
};

class PeakTracker {
 public:
  // Stack |stack| of |pid|/|domain| goes from |objects|/|bytes| (its in use
  // before) by |d_objects|/|d_bytes|.
  void Change(StackId stack, uint32_t pid, uint8_t domain, int64_t objects, int64_t bytes, int64_t d_objects,
              int64_t d_bytes, uint64_t ts_ns);
  // |stack|'s objects and bytes at its scope's peak, given its in use now.
  std::pair<int64_t, int64_t> AtPeak(StackId stack, int64_t objects, int64_t bytes, PeakScope scope) const;
  PeakSummary Summary(uint32_t pid, uint8_t domain, PeakScope scope) const;
  // |pid|'s in use in |domain| now: the sum of its stacks'.
  int64_t InUse(uint32_t pid, uint8_t domain) const {
    auto it = scopes_.find(KeyOf(pid, domain));
    return it == scopes_.end() ? 0 : it->second.inuse;
  }
  // A new window starts: its peak is the live set now.
  void StartWindow();
  // Retired stacks (their ids go to new stacks) and processes.
  void ForgetStacks(std::span<const StackId> stacks);
  void ForgetProcesses(std::span<const pid_t> pids);
  size_t MemoryUsage() const;

 private:
  struct Scope {
    int64_t inuse = 0;
    int64_t peak = 0;
    uint32_t epoch = 1;  // a stack saved at an older epoch has not changed since the peak
    uint64_t peak_ts = 0;
    int64_t win_peak = 0;
    uint32_t win_epoch = 1;
    uint64_t win_peak_ts = 0;
    bool all_time_in_window = false;
  };
  // A stack's value at its scope's last peak (valid at that epoch only).
  struct Saved {
    uint32_t epoch = 0;
    uint32_t win_epoch = 0;
    int64_t objects = 0, bytes = 0;
    int64_t win_objects = 0, win_bytes = 0;
  };
  static uint64_t KeyOf(uint32_t pid, uint8_t domain) { return uint64_t{pid} << 8 | domain; }
  Scope& ScopeOf(uint64_t key);

  absl::flat_hash_map<uint64_t, Scope> scopes_;
  uint64_t cached_key_ = ~uint64_t{0};
  Scope* cached_ = nullptr;  // scopes_[cached_key_]: events come in runs from one process
  std::vector<Saved> saved_;
  // Stack -> its scope, to read a stack's peak without its process.
  std::vector<uint64_t> scope_of_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_PEAK_TRACKER_H_
