#include "exporters/files/html_writer.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "flamegraph_html.h"  // generated from flamegraph.html: kFlameGraphTemplate

#include "base/json_string.h"
#include "base/utf8.h"

namespace gpuflame::exporters {
namespace {

const char* KindName(symbolizer::FrameKind k) {
  switch (k) {
    case symbolizer::FrameKind::kPython: return "python";
    case symbolizer::FrameKind::kTrampoline: return "trampoline";
    case symbolizer::FrameKind::kNative: return "native";
    case symbolizer::FrameKind::kApi: return "api";
    case symbolizer::FrameKind::kMarker: return "marker";
  }
  return "native";
}

// A call tree keyed by frame name (the flame graph merges equal names).
struct Node {
  int64_t total = 0;
  std::map<uint32_t, std::unique_ptr<Node>> children;  // by name index
};

void AppendNode(std::string& out, uint32_t name, const Node& n) {
  absl::StrAppend(&out, "[", name, ",", n.total, ",[");
  bool first = true;
  // Widest first, like Grafana.
  std::vector<std::pair<uint32_t, const Node*>> kids;
  for (const auto& [k, c] : n.children)
    if (c->total != 0) kids.emplace_back(k, c.get());
  std::stable_sort(kids.begin(), kids.end(),
                   [](const auto& a, const auto& b) { return a.second->total > b.second->total; });
  for (const auto& [k, c] : kids) {
    if (!first) out += ',';
    first = false;
    AppendNode(out, k, *c);
  }
  out += "]]";
}

}  // namespace

std::string FlameGraphHtml(const std::vector<const profiler::Profile*>& profiles, const std::string& title,
                           const std::vector<std::string>& notes, const std::vector<GrowthRow>& growth) {
  // One frame table for all profiles: [name, kind, file, line].
  std::map<std::tuple<std::string, std::string>, uint32_t> frame_index;
  std::string frames_json;
  auto intern = [&](const symbolizer::Frame& f) {
    auto key = std::make_tuple(f.name, std::string(KindName(f.kind)));
    auto [it, inserted] = frame_index.try_emplace(key, static_cast<uint32_t>(frame_index.size()));
    if (inserted) {
      if (!frames_json.empty()) frames_json += ',';
      absl::StrAppend(&frames_json, "[", base::JsonString(f.name), ",\"", KindName(f.kind), "\",",
                      base::JsonString(f.file), ",", f.line, "]");
    }
    return it->second;
  };
  symbolizer::Frame root_frame;
  root_frame.kind = symbolizer::FrameKind::kMarker;
  root_frame.name = "total";
  uint32_t root_name = intern(root_frame);

  std::string profiles_json;
  for (const profiler::Profile* p : profiles) {
    std::vector<uint32_t> names;
    names.reserve(p->frames.size());
    for (const auto& f : p->frames) names.push_back(intern(f));
    std::string types_json;
    for (size_t t = 0; t < p->sample_types.size(); t++) {
      Node root;
      for (const profiler::Sample& s : p->samples) {
        int64_t v = s.values[t];
        if (v == 0) continue;
        root.total += v;
        Node* n = &root;
        for (uint32_t fi : s.frames) {
          auto& child = n->children[names[fi]];
          if (!child) child = std::make_unique<Node>();
          child->total += v;
          n = child.get();
        }
      }
      if (!types_json.empty()) types_json += ',';
      absl::StrAppend(&types_json, "{\"type\":", base::JsonString(p->sample_types[t].type),
                      ",\"unit\":", base::JsonString(p->sample_types[t].unit), ",\"root\":");
      AppendNode(types_json, root_name, root);
      types_json += "}";
    }
    if (!profiles_json.empty()) profiles_json += ',';
    absl::StrAppend(&profiles_json, "{\"name\":", base::JsonString(p->name),
                    ",\"default_type\":", base::JsonString(p->default_sample_type), ",\"types\":[",
                    types_json, "]}");
  }
  std::string notes_json;
  for (const std::string& n : notes) absl::StrAppend(&notes_json, notes_json.empty() ? "" : ",", base::JsonString(n));
  std::string growth_json;
  for (const GrowthRow& g : growth)
    absl::StrAppend(&growth_json, growth_json.empty() ? "" : ",", "{\"pid\":", g.pid,
                    ",\"profile\":", base::JsonString(g.profile), ",\"stack\":", base::JsonString(g.stack),
                    ",\"short\":", base::JsonString(g.short_stack),
                    ",\"growth\":", g.growth_bytes, ",\"grown\":", g.intervals_grown, ",\"intervals\":", g.intervals,
                    ",\"first\":", g.first_bytes, ",\"last\":", g.last_bytes, ",\"since\":",
                    absl::StrFormat("%.3f", g.since_seconds), "}");
  return FlameGraphPage(absl::StrCat("{\"frames\":[", frames_json, "],\"profiles\":[", profiles_json, "],\"notes\":[",
                                     notes_json, "],\"growth\":[", growth_json, "]}"),
                        title);
}

std::string FlameGraphPage(std::string_view data_json, const std::string& title) {
  std::string escaped_title = absl::StrReplaceAll(title, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
  return absl::StrReplaceAll(std::string(kFlameGraphTemplate),
                             {{"__TITLE__", escaped_title}, {"__DATA__", std::string(data_json)}});
}

}  // namespace gpuflame::exporters
