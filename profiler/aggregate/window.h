// Window semantics for continuous profiling: each window carries what was
// allocated during it (alloc_*) and what is live at its end (inuse_*).
// The tracker's counters are cumulative; a window is their difference from
// the previous window's end. Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_AGGREGATE_WINDOW_H_
#define GPUFLAME_PROFILER_AGGREGATE_WINDOW_H_

#include <vector>

#include "profiler/aggregate/allocation_tracker.h"

namespace gpuflame::profiler {

class WindowAccumulator {
 public:
  // Per-stack counters for the window ending now.
  std::vector<StackCounters> Close(const std::vector<StackCounters>& cumulative);
  // Retired stacks (StackTable::Retire): their ids start from zero again.
  void Forget(const std::vector<StackId>& ids);

 private:
  std::vector<StackCounters> last_;  // cumulative alloc_* at the previous close
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_WINDOW_H_
