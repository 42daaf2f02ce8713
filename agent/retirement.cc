#include "agent/retirement.h"

#include <vector>

namespace gpuflame::profiler {

std::vector<pid_t> RetireExitedProcesses(Session& session) {
  std::vector<pid_t> exited;
  for (const auto& [pid, info] : session.registry().processes())
    if (info->exited) exited.push_back(pid);
  for (pid_t pid : exited) session.RetireProcess(pid);
  return exited;
}

}  // namespace gpuflame::profiler
