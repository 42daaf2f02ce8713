#include "agent/retirement.h"

#include <vector>

namespace gpuflame::profiler {

Retired RetireExitedProcesses(Session& session) {
  Retired out;
  for (const auto& [pid, info] : session.registry().processes())
    if (info->exited) out.pids.push_back(pid);
  out.stacks = session.RetireProcesses(out.pids);
  return out;
}

}  // namespace gpuflame::profiler
