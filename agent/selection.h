// Which processes the agent reports: all of them, or those the user selected
// by pid, process name, namespace or pod (any one match is enough).
#ifndef GPUFLAME_AGENT_SELECTION_H_
#define GPUFLAME_AGENT_SELECTION_H_

#include <sys/types.h>

#include <string>

#include "agent/agent_config.h"
#include "profiler/process/k8s_metadata.h"

namespace gpuflame::profiler {

// |process| is the process name (comm); |pod| is empty outside Kubernetes.
bool Selected(const Selectors& selectors, pid_t pid, const std::string& process, const PodInfo& pod);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_SELECTION_H_
