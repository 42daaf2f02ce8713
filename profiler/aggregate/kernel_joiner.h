// GPU kernel time on CPU stacks: joins the launch stacks the BPF probe takes
// at gpuflame:launch (keyed by CUPTI correlation ID) with the activity
// records the injection library hands over later, in batches. Each kernel's
// stack is its launch stack plus the kernel's demangled name as the leaf.
//
// Honest totals under sampling: the library samples launch stacks with a
// token bucket, so a kernel may complete without a known launch stack. Its
// time is charged, at the next Flush(), to the sampled launch stacks of the
// same kernel in the same process, in proportion to their sampled launches
// (largest remainders, so sums are exact); when that kernel has never been
// sampled, to `[launch stack not sampled]`.
//
// Unbiased under duty-cycled activity: where the library had CUPTI activity
// on one period in N (the agent's default), each record carries weight N and
// counts N times, in time and in launches; the time actually seen is kept
// beside the estimate (TimeCounters::observed_nanos), so profiles can show
// both. One CUDA graph launch yields many
// kernels with its correlation ID: entries live for a while, not one record.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_AGGREGATE_KERNEL_JOINER_H_
#define GPUFLAME_PROFILER_AGGREGATE_KERNEL_JOINER_H_

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/resolve/stack_table.h"
#include "profiler/aggregate/time_tracker.h"

namespace gpuflame::profiler {

struct JoinStats {
  uint64_t launches = 0;        // sampled launch stacks
  uint64_t records = 0;         // activity records
  uint64_t joined = 0;          // records whose launch stack was sampled
  uint64_t scaled = 0;          // charged to sampled stacks of the same kernel
  uint64_t unattributed = 0;    // charged to `[launch stack not sampled]`
  uint64_t expired_launches = 0;  // launch stacks no activity record ever joined (kLaunchTtlNs)
  uint64_t unknown_names = 0;   // a kernel record whose name was never announced
  uint64_t implausible_durations = 0;  // longer than kMaxKernelNs (the library's bytes): clamped
  uint64_t weighted_records = 0;  // records standing for more than themselves (duty-cycled activity)
  uint64_t estimated_records = 0;  // what all records stand for: records + the unseen they estimate
};

// The longest duration one activity record may add: a day. Records come
// from inside the workload, and unbounded ones would overflow the sums.
inline constexpr int64_t kMaxKernelNs = 86'400'000'000'000;

// A GPU activity record's name as the flame graphs' leaf shows it: the
// kernel's demangled |kernel_name| (null: not announced, "[kernel N]"),
// "[memcpy HtoD]" (CUpti_ActivityMemcpyKind as Nsight names it), "[memset]".
std::string ActivityLeafName(const gf_kernel_record& r, const std::string* kernel_name);

class KernelJoiner {
 public:
  KernelJoiner(StackTable& stacks, FrameTable& frames, TimeTracker& time)
      : stacks_(stacks), frames_(frames), time_(time) {}

  void OnLaunch(pid_t pid, uint32_t correlation, StackId stack, uint64_t ts_ns);
  void OnName(pid_t pid, uint32_t name_id, std::string_view mangled);
  void OnRecords(pid_t pid, std::span<const gf_kernel_record> records, uint64_t now_ns);
  // Charges unsampled kernels (see above) and ages out launch entries. A
  // kernel record whose name has not come yet (an agent that attached after
  // the library said it: it is said again at its next use) waits for it,
  // and is charged as `[kernel N]` once kUnnamedTtlNs old, or at once with
  // |everything| (the end of a recording, a process's exit).
  void Flush(uint64_t now_ns, bool everything = false);
  void ForgetProcess(pid_t pid);
  const JoinStats& stats() const { return stats_; }
  size_t pending_launches() const { return launches_.size(); }
  // Bytes held by the launch table (Swiss table: one control byte per slot).
  size_t MemoryUsage() const { return launches_.capacity() * (sizeof(std::pair<Key, Launch>) + 1); }

  // A launch waits this long for its first record (CUPTI buffers flush
  // within seconds), then, once joined, kJoinedTtlNs for more (a graph's
  // later kernels arrive in the same or the next buffer).
  static constexpr uint64_t kLaunchTtlNs = 30'000'000'000;
  static constexpr uint64_t kJoinedTtlNs = 3'000'000'000;
  static constexpr size_t kMaxPendingLaunches = 1 << 20;
  static constexpr uint64_t kUnnamedTtlNs = 5'000'000'000;
  static constexpr size_t kMaxUnnamed = 1 << 16;
  size_t waiting_for_names() const { return unnamed_count_; }

 private:
  struct Key {
    pid_t pid;
    uint32_t id;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.pid, k.id);
    }
  };
  struct Launch {
    StackId stack;
    uint64_t ts_ns;  // launch, or last record joined to it
    bool joined = false;
  };
  // A kernel's stack: the launch stack (or kNone) plus the leaf for |name|.
  StackId KernelStack(pid_t pid, StackId launch, const gf_kernel_record& r);
  std::string LeafName(pid_t pid, const gf_kernel_record& r);
  // One record; |may_wait|: held if its name has not come yet.
  void OnRecord(pid_t pid, const gf_kernel_record& r, uint64_t now_ns, bool may_wait);
  struct Unnamed {
    gf_kernel_record record;
    uint64_t now_ns;
  };

  StackTable& stacks_;
  FrameTable& frames_;
  TimeTracker& time_;
  absl::flat_hash_map<Key, Launch> launches_;        // (pid, correlation)
  absl::flat_hash_map<Key, std::string> names_;      // (pid, name ID) -> demangled
  // Per (pid, name ID): sampled launches by launch stack, and time waiting to
  // be charged in proportion to them.
  absl::flat_hash_map<Key, absl::flat_hash_map<StackId, int64_t>> sampled_;
  struct Pool {
    gf_kernel_record sample{};  // kind / name of the records pooled
    int64_t count = 0, nanos = 0, observed_nanos = 0;
  };
  absl::flat_hash_map<Key, Pool> unsampled_;
  absl::flat_hash_map<Key, std::vector<Unnamed>> unnamed_;  // (pid, name ID), oldest first
  size_t unnamed_count_ = 0;
  std::string key_;
  JoinStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_KERNEL_JOINER_H_
