#include "profiler/resolve/frame_refresher.h"

#include <vector>


namespace gpuflame::profiler {

size_t FrameRefresher::Refresh(FrameTable& frames) {
  if (frames.unresolved().empty() || !resolver_.has_dirs()) return 0;
  stats_.passes++;
  resolver_.Rescan();  // files may have appeared since the last window
  size_t named = 0;
  std::vector<FrameId> pending = frames.unresolved();  // Resolve() edits the list
  for (FrameId id : pending) {
    const symbolizer::Frame& f = frames.Get(id);
    // Only the indexed directories: the frame's own file was tried at capture.
    auto r = resolver_.Resolve(f.build_id, f.address);
    if (r.outcome != symbolizer::BuildIdResolver::Outcome::kNamed) continue;
    frames.Resolve(id, std::move(r.symbol.name), std::move(r.symbol.system_name));
    named++;
  }
  stats_.resolved += named;
  return named;
}

}  // namespace gpuflame::profiler
