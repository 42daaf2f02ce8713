// The growing stacks (growth.h) as the user reads them: summary.json's
// "growth" section and the terminal's "growing:" block (also the HTML
// page's notes).
#ifndef GPUFLAME_PROFILER_FORENSICS_GROWTH_REPORT_H_
#define GPUFLAME_PROFILER_FORENSICS_GROWTH_REPORT_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/forensics/growth.h"

namespace gpuflame::profiler {

// Stacks listed per process and level in summary.json; the rest are counted
// ("<level>_not_listed"), never dropped silently.
inline constexpr size_t kGrowthJsonStacks = 25;
// Lines of the terminal's block; the rest are counted in its last line.
inline constexpr size_t kGrowthLines = 5;

// summary.json's "growth" value: the intervals, the thresholds, and per
// process and level ("gpu_memory", "torch_memory") the growing stacks,
// named as in the .folded files, largest growth first.
std::string GrowthJson(const GrowthTracker& growth, const std::vector<GrowingStack>& growing, StackSource source,
                       const absl::flat_hash_map<pid_t, std::string>& comm);

// The terminal's block: a heading, then one line per stack (at most
// kGrowthLines), each without a trailing newline.
std::vector<std::string> GrowthLines(const GrowthTracker& growth, const std::vector<GrowingStack>& growing,
                                     StackSource source);

// "gpu_memory" or "torch_memory": the level's profile.
const char* GrowthLevelName(uint8_t domain);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_FORENSICS_GROWTH_REPORT_H_
