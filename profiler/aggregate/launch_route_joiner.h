// The launch route's join (bpf/gpuflame_abi.h, "Launch stacks without
// CUPTI's callbacks"): a launch hit, the stack a uprobe took at one of
// libcuda's launch entry points, has no correlation ID; CUPTI's record of the
// same call has one, and comes a flush later. They meet by thread and time:
// a call's record starts a few microseconds after its entry point's first
// instruction (2.1-6.3 us, p1-p99, on an H100), and calls on one thread do
// not overlap. So a record takes the latest hit on its thread that came
// before its start, within kMaxLeadNs, and after the end of the thread's
// previous record (whose own hit that would be). Stale hits, of calls whose
// records never came (the uprobes stay a moment after a window's records go
// off), are a window apart from the next window's records: at least a tick
// (100 ms), beyond kMaxLeadNs. A joined hit hands its
// stack on with the record's correlation ID (the KernelJoiner's key).
//
// Every hit and record is counted: joined, a record whose hit was not taken
// (the window opened before the agent's uprobes were in), a hit whose record
// never came (the window closed before the uprobes went), a hit dropped over
// the bounds. Hits are held kHitTtlNs at most, kMaxHitsPerProcess per
// process (the records come a flush, about a second, after their hits);
// Expire runs at each window's word, each batch of records, and every 2 s
// (the session: a window may close before the agent hears it open).
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_AGGREGATE_LAUNCH_ROUTE_JOINER_H_
#define GPUFLAME_PROFILER_AGGREGATE_LAUNCH_ROUTE_JOINER_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

struct LaunchRouteStats {
  uint64_t hits = 0;
  uint64_t records = 0;
  uint64_t joined = 0;
  uint64_t records_without_hit = 0;  // no hit before it on its thread (the uprobes not yet in)
  uint64_t hits_expired = 0;         // no record came for them within kHitTtlNs
  uint64_t hits_passed = 0;          // a later call's record came first: theirs never will
  uint64_t api_mismatches = 0;       // the hit before a record was another entry point's: not joined
  uint64_t hits_dropped = 0;         // over kMaxHitsPerProcess (the thread's oldest, or the new one)
};

class LaunchRouteJoiner {
 public:
  struct Launch {
    uint32_t correlation;
    StackId stack;
    uint64_t ts_ns;  // the hit's (CLOCK_MONOTONIC)
    uint32_t tid;    // the host's thread ID
    uint32_t api;    // GF_LAUNCH_API of the entry point
  };
  using JoinedFn = std::function<void(const Launch&)>;

  // A launch hit of |pid|: |ns_tid| is its thread as its PID namespace
  // numbers it (CUPTI's records' name for it), |tid| the host's.
  void OnHit(pid_t pid, uint32_t ns_tid, uint32_t tid, uint64_t ts_ns, StackId stack, uint32_t api);
  // Joins |records| of |pid| (CUPTI's records of the driver's launch calls,
  // CLOCK_MONOTONIC) to their hits; |joined| is called for each that found
  // its hit, in the records' order.
  void OnRecords(pid_t pid, std::span<const gf_api_record> records, const JoinedFn& joined);
  // Hits older than kHitTtlNs at |now_ns| go, counted.
  void Expire(uint64_t now_ns);
  void ForgetProcess(pid_t pid);

  const LaunchRouteStats& stats() const { return stats_; }
  size_t held() const;

  // CUPTI's start lies microseconds after the hit, but the thread may be
  // preempted between the two; a hit older than this is a call whose
  // record never came (a window's tail), not this record's.
  static constexpr uint64_t kMaxLeadNs = 20'000'000;
  static constexpr uint64_t kHitTtlNs = 5'000'000'000;
  static constexpr size_t kMaxHitsPerProcess = 1 << 16;

 private:
  struct Hit {
    uint64_t ts_ns;
    StackId stack;
    uint32_t tid;
    uint32_t api;
  };
  struct Thread {
    std::deque<Hit> hits;      // in time order (one thread's records come in its order)
    uint64_t last_end_ns = 0;  // the latest record's end seen on it
  };
  struct Process {
    absl::flat_hash_map<uint32_t, Thread> threads;  // by namespace thread ID
    size_t hits = 0;
  };

  absl::flat_hash_map<pid_t, Process> processes_;
  LaunchRouteStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_LAUNCH_ROUTE_JOINER_H_
