#include "profiler/forensics/stack_names.h"

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

std::string Printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

std::string FoldedStack(const std::vector<FrameId>& stack, const FrameTable& frames) {
  std::string out;
  for (FrameId id : stack) {
    if (!out.empty()) out += ';';
    const size_t at = out.size();
    out += frames.Get(id).name;
    for (size_t i = at; i < out.size(); i++)
      if (out[i] == ';' || out[i] == '\n' || out[i] == '\r') out[i] = ' ';
  }
  return out;
}

std::string ShortStack(const std::vector<FrameId>& stack, const FrameTable& frames, size_t max_frames) {
  std::vector<const std::string*> python, other;
  for (FrameId id : stack) {
    const symbolizer::Frame& f = frames.Get(id);
    if (f.kind == symbolizer::FrameKind::kPython) python.push_back(&f.name);
    else if (f.kind == symbolizer::FrameKind::kNative || f.kind == symbolizer::FrameKind::kMarker)
      other.push_back(&f.name);
  }
  const std::vector<const std::string*>& use = python.empty() ? other : python;
  if (use.empty()) return "[no stack]";
  const size_t from = use.size() > max_frames ? use.size() - max_frames : 0;
  std::string out = from ? "… › " : "";
  for (size_t i = from; i < use.size(); i++) absl::StrAppend(&out, i > from ? " › " : "", *use[i]);
  return Printable(out);
}

}  // namespace gpuflame::profiler
