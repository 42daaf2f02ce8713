#include "profiler/stack_resolver.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/probe_table.h"

namespace gpuflame::profiler {

using symbolizer::Frame;
using symbolizer::FrameKind;

namespace {

Frame Marker(std::string name) {
  Frame f;
  f.kind = FrameKind::kMarker;
  f.name = std::move(name);
  return f;
}

}  // namespace

Frame StackResolver::PythonFrame(ProcessInfo* proc, const gf_py_frame& raw) {
  stats_.python_frames++;
  if (raw.flags & GF_PYF_TRAMPOLINE) {
    Frame f;
    f.kind = FrameKind::kTrampoline;
    f.name = symbolizer::kTrampolineName;
    return f;
  }
  const symbolizer::CodeInfo* code =
      proc && proc->code ? proc->code->Read(raw.code) : nullptr;
  if (!code) {
    stats_.python_unresolved++;
    return Marker("[unknown python frame]");
  }
  Frame f;
  f.kind = FrameKind::kPython;
  f.system_name = code->qualname;
  f.name = symbolizer::DisplayName(code->qualname);
  if (raw.aux && (code->first_param == "self" || code->first_param == "cls")) {
    // 3.10 has no qualname: name the class from `self` / `cls`.
    if (auto cls = proc->code->TypeName(raw.aux)) {
      f.name = absl::StrCat(*cls, " > ", f.name);
      f.system_name = absl::StrCat(*cls, ".", code->qualname);
    }
  }
  f.file = code->filename;
  f.start_line = code->first_line;
  f.line = symbolizer::LineForInstruction(proc->code->layout().version, code->linetable,
                                          code->first_line, raw.instr);
  return f;
}

std::vector<Frame> StackResolver::Resolve(const gf_event& ev, std::span<const gf_py_frame> py,
                                          std::span<const uint64_t> native) {
  std::vector<Frame> out;
  out.reserve(py.size() + native.size() + 2);
  auto pid = static_cast<pid_t>(ev.pid);
  if (!py.empty()) {
    ProcessInfo* proc = registry_ ? registry_->Find(pid) : nullptr;
    if (ev.flags & GF_EVF_PY_TRUNCATED) {
      stats_.truncated++;
      out.push_back(Marker(absl::StrCat("[truncated: deeper than ", GF_MAX_PY_FRAMES, " frames]")));
    }
    // BPF walks leaf first; flame graphs read root first.
    for (size_t i = py.size(); i-- > 0;) {
      if (!options_.show_trampolines && (py[i].flags & GF_PYF_TRAMPOLINE)) continue;
      out.push_back(PythonFrame(proc, py[i]));
    }
  } else if (!native.empty()) {
    // native[0] is inside the probed function itself: the API leaf names it.
    for (size_t i = native.size(); i-- > 1;) {
      stats_.native_frames++;
      out.push_back(native_.Symbolize(pid, native[i]));
    }
  }
  Frame leaf;
  leaf.kind = FrameKind::kApi;
  leaf.name = std::string(ApiName(ev.api));
  out.push_back(std::move(leaf));
  return out;
}

}  // namespace gpuflame::profiler
