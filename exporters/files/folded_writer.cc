#include "exporters/files/folded_writer.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace gpuflame::exporters {
namespace {

// ';' separates frames and '\n' lines: neither may appear inside a name.
std::string Clean(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (c == ';' || c == '\n' || c == '\r') c = ' ';
  return out;
}

}  // namespace

std::string FoldedStacks(const profiler::Profile& profile, int idx) {
  if (idx < 0 || static_cast<size_t>(idx) >= profile.sample_types.size()) return "";
  std::vector<std::string> names;
  names.reserve(profile.frames.size());
  for (const auto& f : profile.frames) names.push_back(Clean(f.name));
  std::map<std::string, int64_t> merged;
  for (const profiler::Sample& s : profile.samples) {
    int64_t v = s.values[static_cast<size_t>(idx)];
    if (v == 0) continue;
    std::string key;
    for (size_t i = 0; i < s.frames.size(); i++) {
      if (i) key += ';';
      key += names[s.frames[i]];
    }
    merged[key] += v;
  }
  std::string out;
  for (const auto& [stack, v] : merged)
    if (v != 0) absl::StrAppend(&out, stack, " ", v, "\n");
  return out;
}

}  // namespace gpuflame::exporters
