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

// |notes| head the page, one paragraph each (out-of-memory summaries).
std::string FlameGraphHtml(const std::vector<const profiler::Profile*>& profiles, const std::string& title,
                           const std::vector<std::string>& notes = {});

// The page itself around |data_json|, the data block flamegraph.html reads
// ({"frames": [...], "profiles": [...]}, and "diff" for a diff flame
// graph): for other writers of that data (exporters/diff/), so that there is
// one page and one copy of its code.
std::string FlameGraphPage(std::string_view data_json, const std::string& title);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_FILES_HTML_WRITER_H_
