// Inlined calls at an address, from a module's DWARF (.debug_info), so that
// `gf_sim_empty` → `NewSegment` → `cudaMalloc` shows NewSegment even though
// -O2 folded it into its caller and .symtab only knows the caller. Modules
// without DWARF (most pip wheels) cost one failed open. The DIE tree is
// untrusted: walks are bounded in depth and in siblings visited.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_SYMBOLIZER_DWARF_INLINES_H_
#define GPUFLAME_SYMBOLIZER_DWARF_INLINES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/scoped_fd.h"

namespace gpuflame::symbolizer {

struct SourceFrame {
  std::string system_name;  // linkage (mangled) name, or the plain name
  int64_t line = 0;         // line executing in this frame (a call site, or the leaf's line)
};

class DwarfInlines {
 public:
  // Keeps |fd| open as long as the result lives; nullptr (and |fd| closed)
  // when it is invalid or the file has no usable DWARF.
  static std::unique_ptr<DwarfInlines> Open(base::ScopedFd fd);
  ~DwarfInlines();
  DwarfInlines(const DwarfInlines&) = delete;
  DwarfInlines& operator=(const DwarfInlines&) = delete;

  // The function containing |vaddr| then each inlined call in it, outermost
  // first; empty when no compile unit covers |vaddr|.
  std::vector<SourceFrame> At(uint64_t vaddr);

 private:
  struct Handles;
  explicit DwarfInlines(std::unique_ptr<Handles> h);
  std::unique_ptr<Handles> h_;
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_DWARF_INLINES_H_
