// One resolved stack frame: what a flame graph shows and pprof stores.
#ifndef GPUFLAME_SYMBOLIZER_FRAME_H_
#define GPUFLAME_SYMBOLIZER_FRAME_H_

#include <cstdint>
#include <string>

namespace gpuflame::symbolizer {

enum class FrameKind : uint8_t {
  kPython,      // a Python function: `Class > method`
  kTrampoline,  // CPython's C-stack entry: `<interpreter trampoline>`
  kNative,      // a native function or raw address `0x7f15...`
  kApi,         // the probed CUDA / PyTorch allocator function (the leaf)
  kMarker,      // `[truncated]`, `[unknown python frame]`: data we could not get
};

struct Frame {
  FrameKind kind = FrameKind::kNative;
  std::string name;         // display name (Azure convention)
  std::string system_name;  // qualname or mangled symbol
  std::string file;         // Python source file or native module path
  int64_t line = 0;         // Python line of the call, or 0
  int64_t start_line = 0;   // co_firstlineno
  std::string build_id;     // native: the module's GNU build ID
  uint64_t address = 0;     // native: address relative to the module's load bias
  bool inlined = false;     // native: inlined into the frame before it, at the same address

  bool operator==(const Frame&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const Frame& f) {
    return H::combine(std::move(h), f.kind, f.name, f.system_name, f.file, f.line, f.start_line,
                      f.build_id, f.address, f.inlined);
  }
};

inline constexpr const char* kTrampolineName = "<interpreter trampoline>";

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_FRAME_H_
