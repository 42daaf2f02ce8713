// A self-contained HTML flame graph (no network, no external files): every
// profile and sample type in one page, with hover self/total, regex search,
// click-to-zoom and a top-functions table.
#ifndef GPUFLAME_EXPORTERS_FILES_HTML_WRITER_H_
#define GPUFLAME_EXPORTERS_FILES_HTML_WRITER_H_

#include <string>
#include <vector>

#include "profiler/aggregate/profile.h"

namespace gpuflame::exporters {

// |notes| head the page, one paragraph each (out-of-memory summaries).
std::string FlameGraphHtml(const std::vector<const profiler::Profile*>& profiles, const std::string& title,
                           const std::vector<std::string>& notes = {});

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_FILES_HTML_WRITER_H_
