// Process retirement: an exited process has had its last window once that
// window is closed; its stacks, counters and registry entry are then
// forgotten, so that the agent's memory does not grow with process churn and
// a new process reusing the pid is reported afresh.
// Not thread-safe: event loop only (it edits the pipeline's state).
#ifndef GPUFLAME_AGENT_RETIREMENT_H_
#define GPUFLAME_AGENT_RETIREMENT_H_

#include <sys/types.h>

#include <vector>

#include "profiler/pipeline/session.h"

namespace gpuflame::profiler {

struct Retired {
  std::vector<pid_t> pids;
  std::vector<StackId> stacks;  // their ids, free for reuse
};

// Call right after a window close.
Retired RetireExitedProcesses(Session& session);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_RETIREMENT_H_
