// Fuzz target for /proc/PID/maps parsing (inspect/proc_maps.cc,
// ParseProcMaps): the text lists paths a target process chose (spaces,
// newlines escaped or not, " (deleted)", container paths), so it is hostile.
// The input is the maps text itself; seeds are real maps files.
//
// Checked on every input: lines that do not parse are skipped, never merged
// into a mapping (no path holds a newline, no more mappings than lines);
// max_mappings bounds the answer; the derived names stay in their shape.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "inspect/proc_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpuflame::inspect::Mapping;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;

  const auto maps = gpuflame::inspect::ParseProcMaps(text);
  FUZZ_CHECK(maps.size() <= lines);
  for (const Mapping& m : maps) {
    FUZZ_CHECK(m.path.find('\n') == std::string::npos);
    FUZZ_CHECK(m.Basename().find('/') == std::string_view::npos);
    FUZZ_CHECK(m.Basename().size() <= m.path.size());
    FUZZ_CHECK(!m.Contains(m.end));
    const std::string openable = gpuflame::inspect::OpenablePath(1, m);
    FUZZ_CHECK(openable.starts_with("/proc/1/"));
    (void)gpuflame::inspect::FileKey::Of(m);
  }

  // The bound on the number of mappings holds, and what it keeps is the
  // start of the full answer.
  const auto first = gpuflame::inspect::ParseProcMaps(text, 2);
  FUZZ_CHECK(first.size() == std::min<size_t>(2, maps.size()));
  for (size_t i = 0; i < first.size(); i++)
    FUZZ_CHECK(first[i].path == maps[i].path && first[i].start == maps[i].start);
  return 0;
}
