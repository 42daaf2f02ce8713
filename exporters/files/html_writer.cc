#include "exporters/files/html_writer.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "flamegraph_html.h"  // generated from flamegraph.html: kFlameGraphTemplate

#include "base/json_string.h"
#include "exporters/files/call_tree.h"

namespace gpuflame::exporters {
namespace {

// [function, total, [children], 0, lines]: lines is the one source line the
// whole total comes from, or [line, total, self, ...] widest first; absent
// where no line is known (native frames). The 0 is where a diff's nodes carry
// BASE's total (exporters/diff/diff_html.cc): one node shape for the page.
void AppendNode(std::string& out, uint32_t function, const CallNode& n) {
  absl::StrAppend(&out, "[", function, ",", n.total, ",[");
  // Widest first, like Grafana.
  std::vector<std::pair<uint32_t, const CallNode*>> kids;
  for (const auto& [k, c] : n.children)
    if (c->total != 0) kids.emplace_back(k, c.get());
  std::stable_sort(kids.begin(), kids.end(),
                   [](const auto& a, const auto& b) { return a.second->total > b.second->total; });
  for (size_t i = 0; i < kids.size(); i++) {
    if (i) out += ',';
    AppendNode(out, kids[i].first, *kids[i].second);
  }
  out += "]";
  if (n.lines.size() == 1 && n.lines.begin()->second.total == n.total && n.lines.begin()->second.self == n.self) {
    absl::StrAppend(&out, ",0,", n.lines.begin()->first);
  } else if (!n.lines.empty()) {
    std::vector<std::pair<int64_t, LineValue>> lines(n.lines.begin(), n.lines.end());
    std::stable_sort(lines.begin(), lines.end(),
                     [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
    out += ",0,[";
    for (size_t i = 0; i < lines.size(); i++)
      absl::StrAppend(&out, i ? "," : "", lines[i].first, ",", lines[i].second.total, ",", lines[i].second.self);
    out += "]";
  }
  out += "]";
}

}  // namespace

std::string FlameGraphHtml(const std::vector<const profiler::Profile*>& profiles, const std::string& title,
                           const std::vector<std::string>& notes, const std::vector<GrowthRow>& growth,
                           const std::string& utilization_json) {
  // One frame table for all profiles, by function identity: [name, kind, file].
  std::map<FunctionId, uint32_t> function_index;
  std::string frames_json;
  const InternFunction intern = [&](const FunctionId& f) {
    auto [it, inserted] = function_index.try_emplace(f, static_cast<uint32_t>(function_index.size()));
    if (inserted)
      absl::StrAppend(&frames_json, frames_json.empty() ? "" : ",", "[", base::JsonString(f.name), ",\"", f.kind, "\",",
                      base::JsonString(f.file), "]");
    return it->second;
  };
  const uint32_t root_function = intern({"total", "marker", ""});

  std::string profiles_json;
  for (const profiler::Profile* p : profiles) {
    std::string types_json;
    int processes = 0;
    for (size_t t = 0; t < p->sample_types.size(); t++) {
      const CallNode root = BuildCallTree(*p, t, intern, &processes);
      absl::StrAppend(&types_json, t ? "," : "", "{\"type\":", base::JsonString(p->sample_types[t].type),
                      ",\"unit\":", base::JsonString(p->sample_types[t].unit), ",\"root\":");
      AppendNode(types_json, root_function, root);
      types_json += "}";
    }
    // What the page says of an empty profile or value comes from these.
    std::string comments_json;
    for (const std::string& c : p->comments)
      absl::StrAppend(&comments_json, comments_json.empty() ? "" : ",", base::JsonString(c));
    absl::StrAppend(&profiles_json, profiles_json.empty() ? "" : ",", "{\"name\":", base::JsonString(p->name),
                    ",\"default_type\":", base::JsonString(p->default_sample_type), ",\"samples\":", p->samples.size(),
                    ",\"processes\":", processes, ",\"period_type\":", base::JsonString(p->period_type.type),
                    ",\"period\":", p->period, ",\"duration_ns\":", p->duration_nanos, ",\"comments\":[", comments_json,
                    "],\"types\":[", types_json, "]}");
  }
  std::string notes_json;
  for (const std::string& n : notes) absl::StrAppend(&notes_json, notes_json.empty() ? "" : ",", base::JsonString(n));
  std::string growth_json;
  for (const GrowthRow& g : growth)
    absl::StrAppend(&growth_json, growth_json.empty() ? "" : ",", "{\"pid\":", g.pid,
                    ",\"profile\":", base::JsonString(g.profile), ",\"stack\":", base::JsonString(g.stack),
                    ",\"short\":", base::JsonString(g.short_stack), ",\"growth\":", g.growth_bytes,
                    ",\"grown\":", g.intervals_grown, ",\"intervals\":", g.intervals, ",\"first\":", g.first_bytes,
                    ",\"last\":", g.last_bytes, ",\"since\":", absl::StrFormat("%.3f", g.since_seconds), "}");
  return FlameGraphPage(absl::StrCat("{\"frames\":[", frames_json, "],\"profiles\":[", profiles_json, "],\"notes\":[",
                                     notes_json, "],\"growth\":[", growth_json,
                                     "],\"utilization\":", utilization_json.empty() ? "null" : utilization_json, "}"),
                        title);
}

std::string FlameGraphPage(std::string_view data_json, const std::string& title) {
  std::string escaped_title = absl::StrReplaceAll(title, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
  return absl::StrReplaceAll(std::string(kFlameGraphTemplate),
                             {{"__TITLE__", escaped_title}, {"__DATA__", std::string(data_json)}});
}

}  // namespace gpuflame::exporters
