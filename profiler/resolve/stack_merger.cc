#include "profiler/resolve/stack_merger.h"

#include <algorithm>

namespace gpuflame::profiler {

using symbolizer::Frame;
using symbolizer::FrameKind;

bool IsEvalFrame(const Frame& f) {
  return f.kind == FrameKind::kNative && (f.system_name.find("_PyEval_EvalFrameDefault") != std::string::npos ||
                                          f.system_name.find("PyEval_EvalFrameEx") != std::string::npos);
}

std::vector<Frame> MergeStacks(const std::vector<Frame>& native, const std::vector<Frame>& python,
                               const std::string& interpreter_module, bool keep_interpreter_frames) {
  // Split the Python frames into runs, one per C activation of the eval loop.
  std::vector<std::vector<Frame>> runs;
  bool trampolines = std::any_of(python.begin(), python.end(),
                                 [](const Frame& f) { return f.kind == FrameKind::kTrampoline; });
  for (const Frame& f : python) {
    bool starts_run = trampolines ? f.kind == FrameKind::kTrampoline : f.kind == FrameKind::kPython;
    if (runs.empty() || starts_run) runs.emplace_back();
    runs.back().push_back(f);
  }
  std::vector<size_t> evals;
  for (size_t i = 0; i < native.size(); i++)
    if (IsEvalFrame(native[i])) evals.push_back(i);

  auto interpreter_internal = [&](const Frame& f) {
    return !keep_interpreter_frames && !interpreter_module.empty() && f.file == interpreter_module;
  };
  std::vector<Frame> out;
  if (evals.empty()) {
    // Nothing to pair with: Python first, then what was unwound below the
    // interpreter (the unwind may have stopped before reaching libpython).
    out = python;
    for (const Frame& f : native)
      if (!interpreter_internal(f)) out.push_back(f);
    return out;
  }
  size_t k = std::min(evals.size(), runs.size());
  size_t first_eval = evals.size() - k, first_run = runs.size() - k;
  size_t next = first_eval;
  // Above the first Python frame is only process start-up (_start,
  // __libc_start_main, the interpreter's main): the same in every stack, it
  // would crowd the flame graph's root. Kept on request.
  size_t start = keep_interpreter_frames || k == 0 ? 0 : evals[first_eval];
  for (size_t i = start; i < native.size(); i++) {
    if (next < evals.size() && i == evals[next]) {
      if (next == first_eval)  // runs with no activation of their own go first
        for (size_t r = 0; r < first_run; r++) out.insert(out.end(), runs[r].begin(), runs[r].end());
      const auto& run = runs[first_run + (next - first_eval)];
      out.insert(out.end(), run.begin(), run.end());
      next++;
      continue;
    }
    if (IsEvalFrame(native[i]) || interpreter_internal(native[i])) continue;
    out.push_back(native[i]);
  }
  return out;
}

}  // namespace gpuflame::profiler
