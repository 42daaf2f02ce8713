// Fuzz target for Python code objects read out of a profiled process
// (symbolizer/python_code.cc, PythonCodeReader): the process owns that
// memory, so every pointer, length and string kind in it is hostile (a
// stale code object, a length of 2^62, a legacy string pointing anywhere).
//
// Input (tests/fuzz/make_python_seeds.py writes the seeds, real code
// objects of CPython 3.10-3.13 copied from a live interpreter):
//
//   u8 minor (CPython 3.minor, 10-13; another value v stands for 3.(10 + v % 4))
//   u32 instr (an instruction to find the line of, in code units)
//   region* := u64 address | u32 length | length bytes: the process's memory
//
// The code object read is at the first region's address. Checked: strings
// and line tables stay within the reader's caps; a second read of unchanged
// memory is served from the cache with the same answer, and no address
// reuse is reported; names derived for display are empty only for an empty
// name.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "inspect/process_memory.h"
#include "inspect/python_layout.h"
#include "symbolizer/python_code.h"

namespace {

using gpuflame::inspect::PythonVersion;

// The process's memory: disjoint regions (a region overlapping an earlier
// one is left out). A read succeeds only inside one region, as a read across
// an unmapped page fails in a live process.
class RegionMemory final : public gpuflame::inspect::ProcessMemory {
 public:
  bool Add(uint64_t addr, std::string_view bytes) {
    if (bytes.empty() || addr + bytes.size() < addr) return false;
    auto next = regions_.lower_bound(addr);
    if (next != regions_.end() && next->first < addr + bytes.size()) return false;
    if (next != regions_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size() > addr) return false;
    }
    regions_.emplace(addr, std::string(bytes));
    return true;
  }
  bool Read(uint64_t addr, void* out, size_t len) const override {
    auto it = regions_.upper_bound(addr);
    if (it == regions_.begin()) return false;
    --it;
    const uint64_t off = addr - it->first;
    if (off > it->second.size() || len > it->second.size() - off) return false;
    std::memcpy(out, it->second.data() + off, len);
    return true;
  }

 private:
  std::map<uint64_t, std::string> regions_;
};

template <typename T>
bool Take(std::string_view& in, T& out) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(&out, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  uint8_t minor = 0;
  uint32_t instr = 0;
  if (!Take(in, minor) || !Take(in, instr)) return 0;
  const PythonVersion version{3, minor >= 10 && minor <= 13 ? minor : 10 + minor % 4, 0};
  auto layout = gpuflame::inspect::LayoutFor(version);
  FUZZ_CHECK(layout.has_value());  // every version named above is supported

  RegionMemory memory;
  uint64_t code_addr = 0;
  for (int regions = 0; regions < 64; regions++) {
    uint64_t addr = 0;
    uint32_t len = 0;
    if (!Take(in, addr) || !Take(in, len)) break;
    const std::string_view bytes = in.substr(0, len);
    in.remove_prefix(bytes.size());
    if (memory.Add(addr, bytes) && code_addr == 0) code_addr = addr;
  }

  gpuflame::symbolizer::PythonCodeReader reader(memory, *layout);
  const gpuflame::symbolizer::CodeInfo* info = reader.Read(code_addr);
  // What a seed exercises, to see that it reaches a code object (not only errors).
  if (std::getenv("GPUFLAME_FUZZ_VERBOSE"))
    std::fprintf(stderr, "python_code: 3.%d %s in %s, line %d at %u, linetable %zu bytes\n", version.minor,
                 info ? info->qualname.c_str() : "(unreadable)", info ? info->filename.c_str() : "",
                 info ? gpuflame::symbolizer::LineForInstruction(version, info->linetable, info->first_line, instr) : 0,
                 instr, info ? info->linetable.size() : 0);
  if (!info) {
    FUZZ_CHECK(reader.cached() == 0);
    return 0;
  }
  // UTF-8 of at most 1024 code points (python_code.cc's kMaxStringChars).
  FUZZ_CHECK(info->qualname.size() <= 4 * 1024 && info->filename.size() <= 4 * 1024);
  FUZZ_CHECK(info->first_param.size() <= 4 * 1024);
  FUZZ_CHECK(info->linetable.size() <= 64 << 10);
  FUZZ_CHECK(gpuflame::symbolizer::DisplayName(info->qualname).empty() == info->qualname.empty());
  (void)gpuflame::symbolizer::LineForInstruction(version, info->linetable, info->first_line, instr);

  const std::string qualname = info->qualname;
  const std::string linetable = info->linetable;
  const gpuflame::symbolizer::CodeInfo* again = reader.Read(code_addr);
  FUZZ_CHECK(again == info && reader.reuse_detected() == 0);
  FUZZ_CHECK(again->qualname == qualname && again->linetable == linetable);

  // The code object's type, named as a `self` argument's class would be.
  if (auto type = memory.ReadValue<uint64_t>(code_addr + gpuflame::inspect::PythonLayout::kObType)) {
    if (auto name = reader.TypeName(*type)) FUZZ_CHECK(name->size() < 256 && name->find('\0') == std::string::npos);
  }
  return 0;
}
