// Second chances for native frames that were raw addresses when captured
// (stripped library, debug files installed later, a symbol directory synced
// after start-up): before each window is exported, they are looked up again
// by build ID, so later windows, and the files `record` writes at the end,
// carry names without a restart. Cheap when nothing is unresolved.
#ifndef GPUFLAME_PROFILER_RESOLVE_FRAME_REFRESHER_H_
#define GPUFLAME_PROFILER_RESOLVE_FRAME_REFRESHER_H_

#include <cstdint>

#include "profiler/resolve/stack_table.h"
#include "symbolizer/build_id_resolver.h"

namespace gpuflame::profiler {

struct RefreshStats {
  uint64_t passes = 0;
  uint64_t resolved = 0;  // raw frames named on a later pass
};

class FrameRefresher {
 public:
  explicit FrameRefresher(std::vector<std::string> dirs) : resolver_(std::move(dirs)) {}
  // Names what it can of |frames|' unresolved frames; returns how many.
  size_t Refresh(FrameTable& frames);
  const RefreshStats& stats() const { return stats_; }

 private:
  symbolizer::BuildIdResolver resolver_;
  RefreshStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_RESOLVE_FRAME_REFRESHER_H_
