// A self-contained HTML flame graph (no network, no external files): every
// profile and sample type in one page, with hover self/total, regex search,
// click-to-zoom and a top-functions table.
#ifndef GPUFLAME_EXPORTERS_FILES_HTML_WRITER_H_
#define GPUFLAME_EXPORTERS_FILES_HTML_WRITER_H_

#include <string>
#include <string_view>
#include <vector>

#include "profiler/aggregate/profile.h"

namespace gpuflame::exporters {

// A stack whose in use kept growing (profiler/forensics/growth.h), one row of
// the page's growth table.
struct GrowthRow {
  int64_t pid = 0;
  std::string profile;      // the level's profile: gpu_memory, torch_memory
  std::string stack;        // folded, as in the .folded files
  std::string short_stack;  // its innermost Python frames, for the eye
  int64_t growth_bytes = 0;
  int64_t intervals_grown = 0;
  int64_t intervals = 0;
  int64_t first_bytes = 0;
  int64_t last_bytes = 0;
  double since_seconds = 0;
};

// |notes| head the page, one paragraph each (out-of-memory summaries);
// |growth| fills the table of growing stacks under them (none: no table);
// |utilization_json|, summary.json's "utilization" value (JSON text, safe
// inside <script>: record_utilization.cc writes it so), each GPU's verdict,
// strip and kernel histogram above the flame graph ("null": none).
std::string FlameGraphHtml(const std::vector<const profiler::Profile*>& profiles, const std::string& title,
                           const std::vector<std::string>& notes = {}, const std::vector<GrowthRow>& growth = {},
                           const std::string& utilization_json = "null");

// The page itself around |data_json|, the data block flamegraph.html reads
// ({"frames": [...], "profiles": [...]}, and "diff" for a diff flame
// graph): for other writers of that data (exporters/diff/), so that there is
// one page and one copy of its code.
std::string FlameGraphPage(std::string_view data_json, const std::string& title);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_FILES_HTML_WRITER_H_
