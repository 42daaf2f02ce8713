#include "profiler/resolve/frame_refresher.h"

#include <vector>

#include "symbolizer/demangle.h"

namespace gpuflame::profiler {

size_t FrameRefresher::Refresh(FrameTable& frames) {
  if (frames.unresolved().empty() || index_.empty()) return 0;
  stats_.passes++;
  index_.Rescan();  // files may have appeared since the last window
  size_t named = 0;
  std::vector<FrameId> pending = frames.unresolved();  // Resolve() edits the list
  for (FrameId id : pending) {
    const symbolizer::Frame& f = frames.Get(id);
    const symbolizer::ElfFile* elf = index_.Find(f.build_id);
    if (!elf) continue;
    auto hit = elf->Lookup(f.address);  // module-relative, as captured
    if (!hit) continue;
    frames.Resolve(id, symbolizer::Demangle(hit->name), std::string(hit->name));
    named++;
  }
  stats_.resolved += named;
  return named;
}

}  // namespace gpuflame::profiler
