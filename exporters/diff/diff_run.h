// `gpuflame diff`'s work between reading and writing: each pair of profiles
// (diff_inputs.h) diffed (pprof_diff.h) and drawn as a tree (diff_tree.h), or
// the reason it could not be. Kept apart from app/diff_command.cc so that the
// fuzz target and the tests run exactly what the command runs.
#ifndef GPUFLAME_EXPORTERS_DIFF_DIFF_RUN_H_
#define GPUFLAME_EXPORTERS_DIFF_DIFF_RUN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "exporters/diff/diff_inputs.h"
#include "exporters/diff/diff_tree.h"
#include "profile.pb.h"  // generated from exporters/proto/profile.proto

namespace gpuflame::exporters {

struct DiffOutcome {
  std::string name;         // NEW's display name: "torch_memory"
  std::string stem;         // the output's file name less ".diff.pb.gz", unique in the run
  std::string base_origin;  // where each side came from
  std::string new_origin;
  absl::Status status;  // not OK: why the two cannot be diffed
  // With status OK: the sample types left out, only one side having them
  // (DescribeLeftOut); empty when both have the same.
  std::string left_out;
  pprof::Profile diff;           // with status OK
  std::optional<DiffTree> tree;  // with status OK
};

struct DiffRun {
  std::vector<DiffOutcome> outcomes;                   // one per pair, in NEW's order
  std::vector<std::string> only_in_base, only_in_new;  // origins of profiles left unpaired
};

// Two profiles of gpuflame's two memory levels (gpu_memory, torch_memory)
// have the same sample types; only their kinds tell them apart, and such a
// pair is refused rather than diffed as one.
DiffRun DiffSides(const DiffSide& base, const DiffSide& neu);

// The file stem for a profile named |name| ("torch_memory{pid=42, ...}"):
// its kind, then the series' pid when it has one, in characters safe in any
// file name; ".2", ".3" added where |taken| already has it (then it is added).
std::string FileStem(const InputProfile& profile, std::vector<std::string>& taken);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_DIFF_DIFF_RUN_H_
