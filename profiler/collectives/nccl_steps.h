// Stragglers per step, from the collectives' cadence: per rank and per
// training step, its compute time (the step's time less its time in NCCL
// calls) and its time waiting in collectives for the last rank, and each
// step's straggler.
//
// A step is found without the user's help: a training loop issues the same
// collectives from the same call sites every step, so a rank's step starts
// where the call site of its first collective that comes round again (its
// anchor: `Trainer > step › Comm > all_reduce`) is entered again. The n-th
// anchor of every rank is the same operation (NCCL matches collectives by
// order), so a rank's k-th step lines up with every other rank's k-th. A
// step runs from one anchor's entry to the next; the last anchor starts a
// step that has no end and is not counted. A loop whose collectives all
// come from one call site (DDP's buckets, issued from its reducer) makes
// each collective a step: the anchor says which call site it was.
//
// In a step, a rank's time in NCCL calls is every call of its process
// (collectives, sends, receives, group ends) clipped to the step; its wait
// is, for each of its collectives in the step, the last rank's entry less
// its own (on a GPU the wait is the kernel's, but who entered late, and by
// how much, reads the same); the step's straggler is the rank that held the
// others up most (entered last, by NcclStragglers::kLateNs or more, the
// others' waits for it summed), none when every collective was balanced.
//
// record only (Enable()): the agent has the window's straggler profiles.
// Bounded: collective entries and call times kept, all ranks and processes
// together (~40 MiB at most; past the bound later ones are dropped,
// counted: steps end there). Worker
// thread only, fed by NcclTracker.
#ifndef GPUFLAME_PROFILER_COLLECTIVES_NCCL_STEPS_H_
#define GPUFLAME_PROFILER_COLLECTIVES_NCCL_STEPS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/collectives/nccl_comm_id.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

struct NcclStepRank {
  int rank = -1;
  pid_t pid = 0;
  uint64_t step_ns = 0;     // the step's time on this rank (anchor to anchor)
  uint64_t nccl_ns = 0;     // of which in NCCL calls
  uint64_t compute_ns = 0;  // the rest: step_ns - nccl_ns
  uint64_t waiting_ns = 0;  // waiting in its collectives for the last rank
  uint64_t held_ns = 0;     // the others' waits for it, where it entered last
};

struct NcclStep {
  uint64_t number = 0;              // 1, 2, ...
  uint64_t start_ns = 0;            // the first rank's anchor entry
  int straggler = -1;               // -1: balanced
  std::vector<NcclStepRank> ranks;  // by rank
};

// One communicator's steps, as the ranks followed here saw them.
struct NcclCommSteps {
  NcclCommId id;
  int nranks = 0;
  StackId anchor = StackTable::kNone;  // the lowest rank's anchor call site
  std::vector<NcclStep> steps;
};

struct NcclStepStats {
  uint64_t entries_dropped = 0;  // collectives past kMaxEntries
  uint64_t calls_dropped = 0;    // call times past kMaxCalls
};

class NcclSteps {
 public:
  static constexpr size_t kMaxEntries = 1 << 20;  // of every rank together (24 bytes each)
  static constexpr size_t kMaxCalls = 1 << 20;    // of every process together (16 bytes each)
  static constexpr size_t kMaxRanks = 1024;       // of all communicators together

  void Enable() { enabled_ = true; }
  bool enabled() const { return enabled_; }
  // |rank| (of |nranks|) entered its |sequence|-th collective on |id|.
  void OnCollective(const NcclCommId& id, int nranks, int rank, pid_t pid, uint64_t sequence, uint64_t ts_ns,
                    StackId stack);
  // An NCCL call of |pid| from |start_ns| to |end_ns|.
  void OnCall(pid_t pid, uint64_t start_ns, uint64_t end_ns);

  // Each communicator's steps (none where no anchor came round twice on
  // every rank seen), in the order of their IDs.
  std::vector<NcclCommSteps> Steps() const;
  const NcclStepStats& stats() const { return stats_; }

 private:
  struct Entry {
    uint64_t sequence;
    uint64_t ts_ns;
    StackId stack;
  };
  struct RankEntries {
    pid_t pid = 0;
    std::vector<Entry> entries;  // in sequence order
  };
  struct Comm {
    int nranks = 0;
    std::map<int, RankEntries> ranks;
  };
  struct Call {
    uint64_t start_ns, end_ns;
  };

  bool enabled_ = false;
  absl::flat_hash_map<NcclCommId, Comm> comms_;
  size_t ranks_ = 0, entries_ = 0, calls_kept_ = 0;
  absl::flat_hash_map<pid_t, std::vector<Call>> calls_;
  NcclStepStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_COLLECTIVES_NCCL_STEPS_H_
