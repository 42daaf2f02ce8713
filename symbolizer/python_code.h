// Python code objects read out of a live process, and the Azure-style frame
// names built from them (`Class > method`, `outer > inner`, `<module>`).
#ifndef GPUFLAME_SYMBOLIZER_PYTHON_CODE_H_
#define GPUFLAME_SYMBOLIZER_PYTHON_CODE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "inspect/process_memory.h"
#include "inspect/python_layout.h"

namespace gpuflame::symbolizer {

struct CodeInfo {
  std::string qualname;    // co_qualname (3.11+) or co_name (3.10)
  std::string filename;    // co_filename
  std::string first_param; // 3.10: first positional parameter, for self/cls
  int first_line = 0;
  int argcount = 0;
  std::string linetable;   // raw co_linetable bytes
  uint64_t name_ptr = 0;   // identity check for the cache: the qualname object
};

// Line of the instruction at |instr| (code units), or 0 when unknown.
int LineForInstruction(const inspect::PythonVersion& v, std::string_view linetable, int first_line,
                       uint32_t instr);

// `GPUModelRunner._allocate_kv_cache_tensors` -> `GPUModelRunner > _allocate_kv_cache_tensors`,
// `outer.<locals>.inner` -> `outer > inner`; module level names stay as they are.
std::string DisplayName(std::string_view qualname);

// Reads code objects and type names with bounded reads; caches code objects
// by address. Read() is called once per new distinct stack (not per event),
// and re-checks a cached entry's co_firstlineno and co_qualname pointer
// against the process: a freed code object whose address was reused by
// another is detected and re-read. Not thread-safe: owned by the event loop.
class PythonCodeReader {
 public:
  PythonCodeReader(const inspect::ProcessMemory& memory, inspect::PythonLayout layout)
      : memory_(memory), layout_(layout) {}

  const CodeInfo* Read(uint64_t code_addr);
  uint64_t reuse_detected() const { return reuse_detected_; }
  std::optional<std::string> ReadString(uint64_t unicode_addr) const;
  std::optional<std::string> TypeName(uint64_t type_addr) const;
  const inspect::PythonLayout& layout() const { return layout_; }
  size_t cached() const { return cache_.size(); }

 private:
  std::optional<CodeInfo> Load(uint64_t code_addr) const;

  const inspect::ProcessMemory& memory_;
  inspect::PythonLayout layout_;
  absl::flat_hash_map<uint64_t, CodeInfo> cache_;
  uint64_t reuse_detected_ = 0;
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_PYTHON_CODE_H_
