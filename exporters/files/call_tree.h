// The call tree the HTML flame graph draws, built from one sample type of a
// profile: frames merged by function identity (name, kind and file: a Python
// `main` and bash's `main` are two functions), each node keeping how its value
// splits over the lines of its function, and, where the profile's samples come
// from more than one process, a process level at the root (record's CPU
// profile of a workload with helper processes would otherwise be one tree).
#ifndef GPUFLAME_EXPORTERS_FILES_CALL_TREE_H_
#define GPUFLAME_EXPORTERS_FILES_CALL_TREE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "profiler/aggregate/profile.h"

namespace gpuflame::exporters {

// A function as the page shows it; its index in the page's frame table.
struct FunctionId {
  std::string name;
  std::string kind;  // python, trampoline, native, api, marker, process
  std::string file;
  auto operator<=>(const FunctionId&) const = default;
};

struct LineValue {
  int64_t total = 0;
  int64_t self = 0;
};

struct CallNode {
  int64_t total = 0;
  int64_t self = 0;
  std::map<int64_t, LineValue> lines;  // by source line; line 0 (unknown) is not kept
  std::map<uint32_t, std::unique_ptr<CallNode>> children;  // by function index
};

// Interns functions for a page: one frame table for all its profiles.
using InternFunction = std::function<uint32_t(const FunctionId&)>;

// The tree of |p|'s sample type |type|; its root is the page's "total".
// |processes| is set to the number of processes it found (by the pid label).
CallNode BuildCallTree(const profiler::Profile& p, size_t type, const InternFunction& intern, int* processes);

// The function kind's name in the page ("python", "native", ...).
const char* FunctionKindName(symbolizer::FrameKind k);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_FILES_CALL_TREE_H_
