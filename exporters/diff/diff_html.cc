#include "exporters/diff/diff_html.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/json_string.h"
#include "exporters/files/html_writer.h"

namespace gpuflame::exporters {
namespace {

// [frame, new, [children...], base], children widest first (base + new, the
// page's default width) and without those that are zero on both sides.
void AppendNode(std::string& out, const DiffTree& tree, uint32_t node, size_t type,
                const std::vector<uint32_t>& frame_of_name) {
  absl::StrAppend(&out, "[", frame_of_name[tree.nodes()[node].name], ",", tree.neu(node, type), ",[");
  std::vector<std::pair<double, uint32_t>> kids;
  for (uint32_t c : tree.nodes()[node].children)
    if (tree.base(c, type) != 0 || tree.neu(c, type) != 0)
      // In double: the sum of two saturated totals does not overflow there.
      kids.emplace_back(
          -(std::fabs(static_cast<double>(tree.base(c, type))) + std::fabs(static_cast<double>(tree.neu(c, type)))), c);
  std::stable_sort(kids.begin(), kids.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < kids.size(); i++) {
    if (i) out += ',';
    AppendNode(out, tree, kids[i].second, type, frame_of_name);
  }
  absl::StrAppend(&out, "],", tree.base(node, type), "]");
}

}  // namespace

std::string DiffFlameGraphHtml(const std::vector<DiffView>& diffs, const std::string& base_label,
                               const std::string& new_label, const std::string& title,
                               const std::vector<std::string>& notes) {
  // One frame table for all profiles: [name, kind, file, line]. A diff's
  // frames come from pprof files, which say no kind; lines differ between
  // two runs of changed code, so none is given.
  absl::flat_hash_map<std::string, uint32_t> frame_index;
  std::string frames_json;
  std::string profiles_json;
  for (const DiffView& d : diffs) {
    const DiffTree& tree = *d.tree;
    std::vector<uint32_t> frame_of_name;
    frame_of_name.reserve(tree.names().size());
    for (uint32_t n = 0; n < tree.names().size(); n++) {
      const std::string& name = tree.names()[n];
      auto [it, inserted] = frame_index.try_emplace(name, static_cast<uint32_t>(frame_index.size()));
      if (inserted)
        absl::StrAppend(&frames_json, frames_json.empty() ? "" : ",", "[", base::JsonString(name), ",\"\",",
                        base::JsonString(tree.file(n)), ",0]");
      frame_of_name.push_back(it->second);
    }
    std::string types_json;
    for (size_t t = 0; t < tree.sample_types().size(); t++) {
      absl::StrAppend(&types_json, t ? "," : "", "{\"type\":", base::JsonString(tree.sample_types()[t].type),
                      ",\"unit\":", base::JsonString(tree.sample_types()[t].unit), ",\"root\":");
      AppendNode(types_json, tree, 0, t, frame_of_name);
      types_json += "}";
    }
    const std::string default_type =
        tree.sample_types().empty() ? std::string() : tree.sample_types()[tree.default_type()].type;
    absl::StrAppend(&profiles_json, profiles_json.empty() ? "" : ",", "{\"name\":", base::JsonString(d.name),
                    ",\"default_type\":", base::JsonString(default_type), ",\"types\":[", types_json, "]}");
  }
  std::string notes_json;
  for (const std::string& n : notes) absl::StrAppend(&notes_json, notes_json.empty() ? "" : ",", base::JsonString(n));
  return FlameGraphPage(absl::StrCat("{\"frames\":[", frames_json, "],\"profiles\":[", profiles_json, "],\"notes\":[",
                                     notes_json, "],\"diff\":{\"base\":", base::JsonString(base_label),
                                     ",\"new\":", base::JsonString(new_label), "}}"),
                        title);
}

}  // namespace gpuflame::exporters
