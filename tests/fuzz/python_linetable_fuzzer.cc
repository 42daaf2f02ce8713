// Fuzz target for Python line tables (symbolizer/python_code.cc,
// LineForInstruction): co_linetable bytes of a code object in a profiled
// process, in 3.10's (byte delta, line delta) form or 3.11+'s location
// table of varints, with any first line and instruction: the process owns
// all of it. Sanitizers check the decoding (reads past the table, integer
// overflow of the running line number); fuzz_main's and libFuzzer's timeout
// that it stays linear in the table.
//
// Input (tests/fuzz/make_python_seeds.py writes the seeds, real line tables
// of CPython 3.10-3.13): u8 minor (3.minor, 10-13; another value v: 3.(10 + v % 4))
// | i32 first_line | the table. Every instruction the table can
// describe is looked up (a spread sample of a big table), and some past its
// end.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "fuzz_check.h"
#include "inspect/python_layout.h"
#include "symbolizer/python_code.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const int minor = data[0] >= 10 && data[0] <= 13 ? data[0] : 10 + data[0] % 4;
  const gpuflame::inspect::PythonVersion version{3, minor, 0};
  int32_t first_line = 0;
  std::memcpy(&first_line, data + 1, sizeof(first_line));
  const std::string_view table(reinterpret_cast<const char*>(data + 5), size - 5);

  // 3.10: each pair covers at most 255 bytes (127 code units); 3.11+: each
  // entry at most 8 code units. Past that, nothing is described. Each lookup
  // walks the table from its start, so they are spread over that range (at
  // most kLookups): every instruction of a small table, a sample of a big one.
  constexpr uint32_t kLookups = 512;
  const uint64_t limit = static_cast<uint64_t>(table.size()) * 128 + 16;
  const uint64_t step = std::max<uint64_t>(1, limit / kLookups);
  for (uint64_t instr = 0; instr < limit; instr += step) {
    const int line = gpuflame::symbolizer::LineForInstruction(version, table, first_line, static_cast<uint32_t>(instr));
    // Lines are only ever found inside the table: with no table there is none.
    if (table.empty()) FUZZ_CHECK(line == 0);
  }
  (void)gpuflame::symbolizer::LineForInstruction(version, table, first_line, UINT32_MAX);
  return 0;
}
