// The agent's NCCL hangs (profiler/collectives/): once a second, calls
// outstanding past nccl_hang_seconds become hangs, each logged once while
// it is still stuck (operation, rank, bytes, the Python stack that issued
// it, the ranks that have not entered the matching call, its pod) and again
// when it is over, then forgotten (the tracker holds only the hangs stuck
// now); /metrics counts them (self_metrics.cc). Both sides: stuck in the
// NCCL call, or (side=gpu) in a synchronise call after it. Event loop only.
#ifndef GPUFLAME_AGENT_NCCL_WATCH_H_
#define GPUFLAME_AGENT_NCCL_WATCH_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "profiler/collectives/nccl_tracker.h"
#include "profiler/pipeline/session.h"

namespace gpuflame::profiler {

class NcclWatch {
 public:
  // Sets the session's threshold (before its first record).
  NcclWatch(Session& session, double hang_seconds);
  // From the loop, every turn: at most once a second looks for hangs;
  // every call takes the hangs that ended (before the turn's window close
  // retires their processes' stacks). Returns the hangs found stuck at this
  // call (for the flight recorder's incident trace).
  std::vector<NcclHang> Tick(Session& session, uint64_t now_ns);
  // The hangs that ended since the last call (for the nccl_hang profile's
  // window they ended in, WindowSnapshotter::OnHangsEnded).
  std::vector<NcclHang> TakeEnded() { return std::exchange(ended_, {}); }
  // Only the hangs that ended (said over, kept for TakeEnded): at shutdown,
  // after the last events, before the last window close.
  void CollectEnded(Session& session);

 private:
  uint64_t next_ns_ = 0;
  std::vector<NcclHang> ended_;  // taken every loop turn: a second's worth at most
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_NCCL_WATCH_H_
