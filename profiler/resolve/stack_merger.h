// Joins a native stack (DWARF-unwound) with the Python stack of the same
// moment: each native _PyEval_EvalFrameDefault activation is replaced by the
// run of Python frames it was executing (on 3.11+ a run starts at an entry
// `<interpreter trampoline>`; on 3.10 each activation runs one frame), and
// CPython's other internal frames are dropped unless asked for. Pairs from
// the leaf end, so a truncated Python stack still lines up, and native frames
// above the first Python frame (process start-up) are dropped; when there is
// nothing to pair (the unwind stopped early) the Python frames come first and
// the native frames below them follow.
#ifndef GPUFLAME_PROFILER_RESOLVE_STACK_MERGER_H_
#define GPUFLAME_PROFILER_RESOLVE_STACK_MERGER_H_

#include <string>
#include <vector>

#include "symbolizer/frame.h"

namespace gpuflame::profiler {

// |native| and |python| are root first; |interpreter_module| is the path of
// libpython or of the statically linked python executable.
std::vector<symbolizer::Frame> MergeStacks(const std::vector<symbolizer::Frame>& native,
                                           const std::vector<symbolizer::Frame>& python,
                                           const std::string& interpreter_module,
                                           bool keep_interpreter_frames = false);

bool IsEvalFrame(const symbolizer::Frame& f);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_RESOLVE_STACK_MERGER_H_
