// The stragglers as record shows them: summary.json's nccl.stragglers (per
// communicator, every rank's waits and, for the rank the others waited for
// most, what it was doing meanwhile) and a terminal line per communicator
// that had one. Any thread that owns the tracker's data.
#ifndef GPUFLAME_PROFILER_COLLECTIVES_NCCL_STRAGGLER_REPORT_H_
#define GPUFLAME_PROFILER_COLLECTIVES_NCCL_STRAGGLER_REPORT_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/collectives/nccl_steps.h"
#include "profiler/collectives/nccl_stragglers.h"

namespace gpuflame::profiler {

// The JSON array of communicators, each with its ranks and its straggler.
std::string NcclStragglersJson(const NcclStragglers& s, StackSource source,
                               const absl::flat_hash_map<pid_t, std::string>& comm);

// "NCCL straggler: rank 1 (pid 42) of communicator 1f2e3d4c5b6a7988 entered
// last in 9 of 10 collectives; the others waited 0.540 s for it; meanwhile
// it was on the CPU in Trainer > step › DataLoader > __next__ (96%)", one
// per communicator with a rank that held the others up.
std::vector<std::string> NcclStragglerLines(const NcclStragglers& s, StackSource source);

// summary.json's nccl.steps: per communicator, the anchor (the call site a
// step starts at), every rank's totals over the steps and the straggler of
// each, and the first kMaxStepsJson steps one by one (the rest counted).
inline constexpr size_t kMaxStepsJson = 1000;
std::string NcclStepsJson(const NcclSteps& s, StackSource source);

// "NCCL steps of communicator 1f2e3d4c5b6a7988 (by collective cadence, from
// one Trainer > step › Comm > all_reduce to the next): 9 steps; rank 1 the
// straggler in 9; a step, on average: rank 0 compute 48.0 ms, waiting
// 50.0 ms; rank 1 compute 98.0 ms, waiting 0.0 ms", one per communicator
// with steps.
std::vector<std::string> NcclStepLines(const NcclSteps& s, StackSource source);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_COLLECTIVES_NCCL_STRAGGLER_REPORT_H_
