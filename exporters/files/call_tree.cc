#include "exporters/files/call_tree.h"

#include "absl/strings/str_cat.h"

namespace gpuflame::exporters {

const char* FunctionKindName(symbolizer::FrameKind k) {
  switch (k) {
    case symbolizer::FrameKind::kPython: return "python";
    case symbolizer::FrameKind::kTrampoline: return "trampoline";
    case symbolizer::FrameKind::kNative: return "native";
    case symbolizer::FrameKind::kApi: return "api";
    case symbolizer::FrameKind::kMarker: return "marker";
  }
  return "native";
}

namespace {

// The sample's pid label, or -1.
int64_t PidOf(const profiler::Sample& s) {
  for (const profiler::Label& l : s.labels)
    if (l.key == "pid" && l.str.empty()) return l.num;
  return -1;
}

// "python3 (pid 4242)" for each pid, from the samples' process labels.
std::map<int64_t, std::string> ProcessNames(const profiler::Profile& p) {
  std::map<int64_t, std::string> names;
  for (const profiler::Sample& s : p.samples) {
    const int64_t pid = PidOf(s);
    auto it = names.try_emplace(pid, pid < 0 ? "[no pid]" : absl::StrCat("pid ", pid)).first;
    for (const profiler::Label& l : s.labels)
      if (l.key == "process" && !l.str.empty() && pid >= 0 && it->second.starts_with("pid "))
        it->second = absl::StrCat(l.str, " (pid ", pid, ")");
  }
  return names;
}

CallNode& Child(CallNode& n, uint32_t function) {
  auto& child = n.children[function];
  if (!child) child = std::make_unique<CallNode>();
  return *child;
}

}  // namespace

CallNode BuildCallTree(const profiler::Profile& p, size_t type, const InternFunction& intern, int* processes) {
  std::vector<uint32_t> functions;
  functions.reserve(p.frames.size());
  for (const symbolizer::Frame& f : p.frames)
    functions.push_back(intern({f.name, FunctionKindName(f.kind), f.file}));
  // The process level only where there is more than one process: a tree of
  // one process reads as before.
  const std::map<int64_t, std::string> names = ProcessNames(p);
  *processes = static_cast<int>(names.size() - names.count(-1));
  const bool by_process = *processes > 1;

  CallNode root;
  for (const profiler::Sample& s : p.samples) {
    if (type >= s.values.size() || s.values[type] == 0) continue;
    const int64_t v = s.values[type];
    root.total += v;
    CallNode* n = &root;
    if (by_process) {
      n = &Child(*n, intern({names.at(PidOf(s)), "process", ""}));
      n->total += v;
    }
    int64_t leaf_line = 0;
    for (uint32_t fi : s.frames) {
      if (fi >= p.frames.size()) continue;  // a reader's profile: never index out of bounds
      n = &Child(*n, functions[fi]);
      n->total += v;
      leaf_line = p.frames[fi].line;
      if (leaf_line != 0) n->lines[leaf_line].total += v;
    }
    n->self += v;
    if (leaf_line != 0 && n != &root) n->lines[leaf_line].self += v;
  }
  return root;
}

}  // namespace gpuflame::exporters
