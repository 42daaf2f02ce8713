#include "profiler/resolve/stack_resolver.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include <algorithm>

#include "profiler/probes/probe_table.h"
#include "profiler/resolve/launch_leaf.h"
#include "profiler/resolve/stack_merger.h"

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

Frame StackResolver::PythonFrame(ProcessInfo* proc, const gf_py_frame& raw, uint64_t& unresolved) {
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
    unresolved++;
    return Marker("[unknown python frame]");
  }
  if ((raw.flags & GF_PYF_FIRST_LINE) && static_cast<uint16_t>(code->first_line) != raw.first_line) {
    // Freed and reused by another code object between the sample and now:
    // its name now would be a lie.
    unresolved++;
    stats_.python_reused++;
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

std::vector<Frame> StackResolver::PythonFrames(const gf_event& ev, std::span<const gf_py_frame> py) {
  std::vector<Frame> out;
  if (py.empty()) return out;
  ProcessInfo* proc = registry_ ? registry_->Find(static_cast<pid_t>(ev.pid)) : nullptr;
  if (ev.flags & GF_EVF_PY_TRUNCATED) {
    stats_.truncated++;
    out.push_back(Marker(absl::StrCat("[truncated: deeper than ", GF_MAX_PY_FRAMES, " frames]")));
  }
  // BPF walks leaf first; flame graphs read root first.
  uint64_t& unresolved = ev.kind == GF_EV_CPU_SAMPLE ? stats_.cpu_python_unresolved : stats_.python_unresolved;
  for (size_t i = py.size(); i-- > 0;) out.push_back(PythonFrame(proc, py[i], unresolved));
  return out;
}

std::vector<Frame> StackResolver::ResolveMixed(const gf_event& ev, std::span<const gf_py_frame> py,
                                               std::span<const uint64_t> pcs) {
  stats_.mixed++;
  auto pid = static_cast<pid_t>(ev.pid);
  std::vector<Frame> python = PythonFrames(ev, py);
  std::string_view leaf_name = ApiName(ev.api);
  std::vector<Frame> native;
  for (size_t i = pcs.size(); i-- > 0;) {
    // Past the first, each pc is a return address: the call is the byte before.
    size_t before = native.size();
    native_.Append(pid, i == 0 ? pcs[i] : pcs[i] - 1, native);
    stats_.native_frames += native.size() - before;
    // Inside the probed API: the leaf names it. c10::reportMemoryUsageToProfiler
    // is probed for the caching allocator's malloc and free, which the leaf names.
    if (i == 0 && ev.api != GF_API_NONE && native.size() == before + 1 &&
        (native.back().name == leaf_name || ev.api == GF_API_TORCH_REPORT))
      native.pop_back();
  }
  // Frames of our injection library at the top are ours, not the workload's:
  // the launch probe fires inside CUPTI's callback into it (the stack ends at
  // the launching CUDA API, cudaLaunchKernel, ...), and its in-process tensor
  // hook sits between the caching allocator and the function it reports to.
  const bool launch = ev.domain == GF_DOMAIN_LAUNCH;
  auto ours = [launch](const Frame& f) {
    return f.file.find("libgpuflame_cupti") != std::string::npos ||
           (launch && f.file.find("libcupti") != std::string::npos);
  };
  while (!native.empty() && ours(native.back())) native.pop_back();
  // Taken in the driver's launch call, also under the runtime's: the API
  // the workload called is the leaf.
  if (launch) {
    KeepOutermostCudaFrame(native);
    NameUnnamedLaunchLeaf(native, static_cast<uint32_t>(ev.arg1));
  }
  ProcessInfo* proc = registry_ ? registry_->Find(pid) : nullptr;
  std::vector<Frame> out = MergeStacks(native, python, proc ? proc->python_module : "",
                                       options_.keep_interpreter_frames);
  if (!options_.show_trampolines)
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const Frame& f) { return f.kind == FrameKind::kTrampoline; }),
              out.end());
  if (ev.api != GF_API_NONE) {
    Frame leaf;
    leaf.kind = FrameKind::kApi;
    leaf.name = std::string(leaf_name);
    out.push_back(std::move(leaf));
  }
  return out;
}

std::vector<Frame> StackResolver::Resolve(const gf_event& ev, std::span<const gf_py_frame> py,
                                          std::span<const uint64_t> native) {
  std::vector<Frame> out = PythonFrames(ev, py);
  auto pid = static_cast<pid_t>(ev.pid);
  if (!options_.show_trampolines)
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const Frame& f) { return f.kind == FrameKind::kTrampoline; }),
              out.end());
  if (py.empty() && !native.empty()) {
    // With a probed API, native[0] is inside it and the API leaf names it; a
    // CPU sample's native[0] is the exact pc it interrupted.
    const size_t last = ev.api != GF_API_NONE ? 1 : 0;
    for (size_t i = native.size(); i-- > last;) {
      size_t before = out.size();
      // Past the first, a return address: the call is the byte before.
      native_.Append(pid, i == 0 ? native[i] : native[i] - 1, out);
      stats_.native_frames += out.size() - before;
    }
  }
  if (ev.api != GF_API_NONE) {
    Frame leaf;
    leaf.kind = FrameKind::kApi;
    leaf.name = std::string(ApiName(ev.api));
    out.push_back(std::move(leaf));
  }
  return out;
}

}  // namespace gpuflame::profiler
