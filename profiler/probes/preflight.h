// Checks that turn kernel and permission problems into one clear sentence
// before anything is loaded.
#ifndef GPUFLAME_PROFILER_PROBES_PREFLIGHT_H_
#define GPUFLAME_PROFILER_PROBES_PREFLIGHT_H_

#include "absl/status/status.h"

namespace gpuflame::profiler {

// What the run needs of the kernel: BPF, perf events, other processes'
// memory, uprobes (asked of the kernel itself), and, when it holds processes
// at its gates (|holds_processes|), CAP_KILL to resume them.
absl::Status CheckPrivileges(bool holds_processes);
absl::Status CheckKernel();
// Rewrites a BPF load/attach failure as advice for the user.
absl::Status ExplainBpfFailure(const absl::Status& status);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_PREFLIGHT_H_
