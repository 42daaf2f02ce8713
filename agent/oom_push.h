// The agent's out-of-memory captures (profiler/forensics/) go out as they
// end, not at the window's end: each as its process's gpu_oom profile
// (__name__="gpu_oom", the series labels of its other profiles), through the
// export thread like a window (limits, labels, encoding, the push queue and
// its spool), and each is logged with one line. Processes the agent's
// selectors leave out are left out here too.
// Event loop only (the pipeline is read).
#ifndef GPUFLAME_AGENT_OOM_PUSH_H_
#define GPUFLAME_AGENT_OOM_PUSH_H_

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "agent/agent_config.h"
#include "agent/window_export.h"
#include "profiler/pipeline/session.h"

namespace gpuflame::profiler {

// Hands over every capture that ended since the last call; returns their
// processes (for the flight recorder's incident trace).
std::vector<pid_t> PushOomCaptures(const AgentConfig& cfg, Session& session, WindowExporter& exporter);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_OOM_PUSH_H_
