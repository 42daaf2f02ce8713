// The agent's NCCL profiles, one window at a time, per process:
//  - `nccl`: time, calls, bytes and the kernels' GPU time in NCCL calls by
//    stack, this window's share (the tracker's totals are since the start:
//    the window's is the difference from the last close);
//  - `nccl_hang`: per hang, the nanoseconds it was stuck within the window,
//    on the stack that issued the stuck call, with the hang's details as
//    sample labels (Pyroscope makes them series labels: a hang is a series
//    of its own for as long as it lasts, and its `outcome` label says
//    stuck, then returned / process_ended / thread_ended in the window it
//    ended). A flame graph over a time range shows where ranks were stuck
//    and for how long; a time series shows stuck seconds per second (1.0:
//    stuck the whole window);
//  - `nccl_straggler`: what each straggler rank was doing (its CPU stacks)
//    while the others waited for it, weighted by their wait, this window.
// Each process's profiles carry its communicator ID and rank as series
// labels (NcclRankLabels) so that Grafana can line up the ranks that
// several nodes' agents report.
// Not thread-safe: event loop only (it reads the tracker and stack table).
#ifndef GPUFLAME_AGENT_NCCL_WINDOW_H_
#define GPUFLAME_AGENT_NCCL_WINDOW_H_

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/profile.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {

inline constexpr const char* kNcclHangProfile = "nccl_hang";
inline constexpr const char* kNcclStragglerProfile = "nccl_straggler";
// At most this many ranks are named in a hang's `missing_ranks` label (then
// "+N"): the label's values stay few and short.
inline constexpr size_t kMaxMissingRanksNamed = 8;
// The sample labels of a hang, at most: operation, side, outcome,
// nccl_communicator, nccl_rank, peer, missing_ranks.
inline constexpr size_t kNcclHangLabels = 7;
// Pyroscope's labels per series (its distributor's default limit).
inline constexpr size_t kMaxSeriesLabels = 30;

// The series labels of |pid|'s NCCL profiles: nccl_communicator (the first
// 16 hex digits of the ID of the largest communicator the process holds a
// rank of: its job's world), nccl_rank and nccl_ranks. One pair per
// process, so they add no series beyond the process's own; none when the
// process holds no rank seen.
std::vector<std::pair<std::string, std::string>> NcclRankLabels(const NcclTracker& t, pid_t pid);

class NcclWindow {
 public:
  static constexpr size_t kMaxEnded = 4096;  // ended hangs held between two closes

  // Hangs that ended since the last close (NcclWatch): their last part
  // goes into the window they ended in. Past kMaxEnded, counted.
  void OnHangsEnded(std::span<const NcclHang> ended);

  // This window's profiles by pid. |now_ns|: the close, CLOCK_MONOTONIC.
  absl::flat_hash_map<pid_t, std::vector<Profile>> Close(const NcclTracker& t, StackSource source,
                                                         const absl::flat_hash_map<pid_t, std::string>& comm,
                                                         int64_t start_wall, int64_t duration, uint64_t now_ns);
  // Stacks about to be reused for other processes.
  void ForgetStacks(std::span<const StackId> stacks);

  uint64_t ended_dropped() const { return ended_dropped_; }

 private:
  using DoingKey = std::tuple<NcclCommId, int, StackId>;
  absl::flat_hash_map<StackId, NcclStackTotals> last_totals_;
  absl::flat_hash_map<DoingKey, uint64_t> last_doing_;
  std::vector<NcclHang> ended_;
  // Per hang stuck now (by number): up to where it was pushed.
  absl::flat_hash_map<uint64_t, uint64_t> charged_;
  uint64_t ended_dropped_ = 0;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_NCCL_WINDOW_H_
