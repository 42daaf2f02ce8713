// Writes what `record` produced: pprof files, folded stacks per sample type,
// the HTML flame graph and a summary.json with every counter (drops included).
#ifndef GPUFLAME_APP_RECORD_OUTPUT_H_
#define GPUFLAME_APP_RECORD_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/aggregate/profile.h"

namespace gpuflame::profiler {

// Creates |dir| (and parents) and checks it is writable: checked before
// recording so that a typo does not cost a whole profiling run.
absl::Status PrepareOutputDir(const std::string& dir);

// Returns the paths written.
absl::StatusOr<std::vector<std::string>> WriteRecordOutput(
    const std::string& dir, const std::vector<const profiler::Profile*>& profiles,
    const std::string& title, const std::string& summary_json);

// "1.50 GiB"
std::string HumanBytes(int64_t bytes);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_OUTPUT_H_
