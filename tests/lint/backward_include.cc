// Must not compile: the resolve stage reaching forward into the agent. The
// LayeringIsEnforcedByTheBuild test builds this file with gf_resolve's include
// scope and expects the agent header not to be found.
#include "profiler/resolve/stack_table.h"
#include "agent/agent_config.h"
