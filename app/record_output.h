// Writes what `record` produced: pprof files, folded stacks per sample type,
// the HTML flame graph and a summary.json with every counter (drops included).
#ifndef GPUFLAME_APP_RECORD_OUTPUT_H_
#define GPUFLAME_APP_RECORD_OUTPUT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/human_units.h"
#include "exporters/files/html_writer.h"
#include "profiler/aggregate/profile.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/probes/program_stats.h"

namespace gpuflame::profiler {

// Creates |dir| (and parents) and checks it is writable: checked before
// recording so that a typo does not cost a whole profiling run.
absl::Status PrepareOutputDir(const std::string& dir);

// The names of the files the last record wrote in its directory, one a
// line: what the next record into it removes first, and nothing else.
inline constexpr char kOutputManifest[] = ".gpuflame-outputs";
// Removes the files |dir|'s manifest lists (plain names in |dir| only, never
// a directory) and the manifest; returns the names removed.
std::vector<std::string> RemoveStaleOutputs(const std::string& dir);

// Removes the last run's outputs (RemoveStaleOutputs), writes these and
// lists them in the manifest. Returns the paths written. |notes| head the HTML page (out-of-memory
// captures' summaries), then |growth|'s table (the stacks that kept growing).
// |files|: more files, by name, already encoded (the timeline's trace).
// |utilization_json|: summary.json's "utilization", for the page's GPU section.
absl::StatusOr<std::vector<std::string>> WriteRecordOutput(
    const std::string& dir, const std::vector<const profiler::Profile*>& profiles, const std::string& title,
    const std::string& summary_json, const std::vector<std::string>& notes = {},
    const std::vector<exporters::GrowthRow>& growth = {},
    const std::vector<std::pair<std::string, std::string>>& files = {}, const std::string& utilization_json = "null");

// "1.50 GiB" (record_command.cc says it unqualified).
using base::HumanBytes;

// gpuflame's own cost over a recording: the time its BPF programs ran in the
// profiled processes (charged to them by the kernel) and its own CPU time.
struct SelfCost {
  std::string bpf_stats;              // ProgramStats::Describe(): "on" | "unavailable: <reason>"
  std::vector<ProgramCost> programs;  // per program, since it was loaded
  double cpu_seconds = -1;            // gpuflame's own CPU time, user + system; -1 unknown
  LibraryCost library;                // libgpuflame_cupti.so's own time in the processes
};
// summary.json's "self_cost" value (a JSON object, one program per line).
std::string SelfCostJson(const SelfCost& cost);
// The terminal's line: "gpuflame cost: 1.23 s in BPF programs (0.84 µs per
// hit, 1.46 M hits), 52.1 ms in the workloads' library (0.21 µs per tensor
// event), 0.41 s CPU in gpuflame"; the machine-wide programs' part, where
// they ran, is said after the BPF figure.
std::string SelfCostLine(const SelfCost& cost);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_OUTPUT_H_
