// Which rank the others wait for. NCCL matches a communicator's
// collectives by order: every rank's n-th collective is one operation, and
// no rank can finish it before the last one has entered. So for each such
// operation that every rank this gpuflame follows entered, the last to
// enter is its straggler, and each other rank waited from its own entry to
// the straggler's. On a GPU a collective's call returns once enqueued and
// the wait happens in its kernel, but the entries are still when each rank
// issued it: who was late, and by how much, reads the same.
//
// What the straggler was doing while the others waited comes from its CPU
// samples taken between the first rank's entry and its own: each
// operation's wait (the others' waits summed) is shared evenly among them,
// as the idle-time flame graph shares an idle gap; a lateness with no
// sample of it on the CPU (sleeping, blocked on I/O or a lock) is said so.
//
// Only ranks on this node are seen: with ranks elsewhere, an operation is
// judged among the ranks here, and a rank elsewhere may have been later
// still (the report says how many of the communicator's ranks it saw).
// Point-to-point calls are left out: a send and its receive are two ranks,
// and a late one shows as the other's hang or wait in the nccl profile.
//
// Bounded: open operations (waiting for ranks that never enter: a stopped
// or crashed rank, a rank elsewhere) and CPU samples kept per process, each
// overflow counted. Worker thread only, fed by NcclTracker.
#ifndef GPUFLAME_PROFILER_COLLECTIVES_NCCL_STRAGGLERS_H_
#define GPUFLAME_PROFILER_COLLECTIVES_NCCL_STRAGGLERS_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "profiler/collectives/nccl_comm_id.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

// One rank's part in the operations judged.
struct NcclRankWaits {
  int rank = -1;
  pid_t pid = 0;
  uint64_t operations = 0;  // judged operations it entered
  uint64_t last = 0;        // ... of which it entered last, by kLateNs or more
  uint64_t held_ns = 0;     // when last: the other ranks' waits for it, summed
  uint64_t waited_ns = 0;   // its own waits for the last rank
  // held_ns by what it was doing: its CPU samples in the lateness...
  absl::flat_hash_map<StackId, uint64_t> doing_ns;
  uint64_t off_cpu_ns = 0;         // ... or none of it on the CPU
  uint64_t beyond_samples_ns = 0;  // ... or before the oldest sample kept
  // held_ns by the stack it entered its late collectives from.
  absl::flat_hash_map<StackId, uint64_t> late_from_ns;
};

struct NcclCommWaits {
  NcclCommId id;
  int nranks = 0;
  int ranks_seen = 0;     // ranks of it this gpuflame followed (at most nranks)
  uint64_t judged = 0;    // operations every rank seen entered
  uint64_t balanced = 0;  // ... of which the last came within kLateNs of the first
  uint64_t unjudged = 0;  // operations some rank seen never entered (evicted, or open at the end)
  std::map<int, NcclRankWaits> ranks;
};

struct NcclStragglerStats {
  uint64_t samples = 0;             // CPU samples of processes with a rank
  uint64_t operations_evicted = 0;  // open operations past kMaxOpen: unjudged
  uint64_t samples_evicted = 0;     // CPU samples past kMaxSamples of a process
  uint64_t communicators_dropped = 0;
};

class NcclStragglers {
 public:
  // A rank entering under a millisecond after the first did not hold anyone
  // up: launch jitter, not a straggler.
  static constexpr uint64_t kLateNs = 1'000'000;
  static constexpr size_t kMaxOpen = 4096;
  static constexpr size_t kMaxSamples = 16384;  // per process: ~2.8 min of one thread at 97 Hz
  static constexpr size_t kMaxCommunicators = 1024;

  // A process holds a rank: its CPU samples are kept from now on (the
  // lateness of its first collective starts before that collective).
  void OnRankProcess(pid_t pid) { sampled_.try_emplace(pid); }
  bool Wants(pid_t pid) const { return sampled_.contains(pid); }
  void OnCpuSample(pid_t pid, uint64_t ts_ns, StackId stack);
  // |rank| of the |nranks| of communicator |id| entered its |sequence|-th
  // collective at |ts_ns| from |stack|; |ranks_seen|: how many of the
  // communicator's ranks this gpuflame follows now.
  void OnCollective(const NcclCommId& id, int nranks, int ranks_seen, int rank, pid_t pid, uint64_t sequence,
                    uint64_t ts_ns, StackId stack);
  // The process is gone (or retired by the agent): its samples go.
  void OnProcessExit(pid_t pid) { sampled_.erase(pid); }
  // Recording ends: operations still open are unjudged.
  void Finish();
  void ForgetStacks(std::span<const StackId> stacks);
  // The communicators none of whose ranks remain (the agent, between windows).
  void ForgetCommunicators(const absl::flat_hash_set<NcclCommId>& gone);

  const absl::flat_hash_map<NcclCommId, NcclCommWaits>& communicators() const { return comms_; }
  const NcclStragglerStats& stats() const { return stats_; }

 private:
  struct Entry {
    int rank;
    pid_t pid;
    uint64_t ts_ns;
    StackId stack;
  };
  struct Open {
    std::vector<Entry> entries;
    uint64_t opened = 0;  // order of opening, for eviction
  };
  struct Sample {
    uint64_t ts_ns;
    StackId stack;
  };
  using OpKey = std::pair<NcclCommId, uint64_t>;

  void Judge(NcclCommWaits& c, const std::vector<Entry>& entries);
  // Shares |ns| among |pid|'s CPU samples in (from, to].
  void ChargeDoing(NcclRankWaits& r, uint64_t from, uint64_t to, uint64_t ns);
  void EvictOldest();

  absl::flat_hash_map<NcclCommId, NcclCommWaits> comms_;
  absl::flat_hash_map<OpKey, Open> open_;
  uint64_t opened_ = 0;
  absl::flat_hash_map<pid_t, std::deque<Sample>> sampled_;
  NcclStragglerStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_COLLECTIVES_NCCL_STRAGGLERS_H_
