// Turns the raw frames of one event into named frames, root first:
// Python frames by code object (`Class > method`, with the call's line),
// `<interpreter trampoline>` where CPython entered the eval loop from C,
// native frames by ELF symbol for threads without Python, and the probed API
// as the leaf. Runs once per distinct raw stack, while the process is alive.
#ifndef GPUFLAME_PROFILER_RESOLVE_STACK_RESOLVER_H_
#define GPUFLAME_PROFILER_RESOLVE_STACK_RESOLVER_H_

#include <span>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "profiler/process/process_registry.h"
#include "symbolizer/frame.h"
#include "symbolizer/native_symbolizer.h"

namespace gpuflame::profiler {

struct ResolveStats {
  uint64_t python_frames = 0;
  uint64_t python_unresolved = 0;  // code object unreadable: `[unknown python frame]`
  uint64_t python_reused = 0;      // of which: freed and its address reused since the sample
  // The same for CPU samples, which often land in short-lived code (module
  // bodies run once at import) and are counted apart.
  uint64_t cpu_python_unresolved = 0;
  uint64_t native_frames = 0;
  uint64_t truncated = 0;
  uint64_t mixed = 0;  // stacks joined with DWARF-unwound native frames
};

class StackResolver {
 public:
  struct Options {
    bool show_trampolines = true;
    bool keep_interpreter_frames = false;  // CPython's own C frames in mixed stacks
  };
  StackResolver(ProcessRegistry* registry, symbolizer::NativeSymbolizer& native, Options options)
      : registry_(registry), native_(native), options_(options) {}

  std::vector<symbolizer::Frame> Resolve(const gf_event& ev, std::span<const gf_py_frame> py,
                                         std::span<const uint64_t> native);
  // Python frames joined with a DWARF-unwound native stack (|pcs| leaf first,
  // return addresses past the first).
  std::vector<symbolizer::Frame> ResolveMixed(const gf_event& ev, std::span<const gf_py_frame> py,
                                              std::span<const uint64_t> pcs);
  const ResolveStats& stats() const { return stats_; }

 private:
  symbolizer::Frame PythonFrame(ProcessInfo* proc, const gf_py_frame& f, uint64_t& unresolved);
  std::vector<symbolizer::Frame> PythonFrames(const gf_event& ev, std::span<const gf_py_frame> py);

  ProcessRegistry* registry_;  // may be null (benchmarks)
  symbolizer::NativeSymbolizer& native_;
  Options options_;
  ResolveStats stats_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_RESOLVE_STACK_RESOLVER_H_
