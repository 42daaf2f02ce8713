// `gpuflame agent`: continuous profiling of every CUDA process on a node,
// one gpu_memory / torch_memory profile per process per window, pushed to
// Grafana Pyroscope, labelled per pod.
#ifndef GPUFLAME_AGENT_AGENT_COMMAND_H_
#define GPUFLAME_AGENT_AGENT_COMMAND_H_

#include "agent/agent_config.h"

namespace gpuflame::profiler {

int RunAgent(const AgentConfig& config);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_AGENT_COMMAND_H_
