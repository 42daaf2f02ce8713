// What a process is doing, as the kernel says in /proc/PID/stat: for lines
// that name a rank another waits for ("stopped", "sleeping"). Any thread.
#ifndef GPUFLAME_PROFILER_PROCESS_PROCESS_STATE_H_
#define GPUFLAME_PROFILER_PROCESS_PROCESS_STATE_H_

#include <sys/types.h>

#include <string>

namespace gpuflame::profiler {

// "running", "sleeping", "in uninterruptible wait", "stopped", "stopped by a
// tracer", "exited"; "gone" when it has no entry; "" when it cannot say.
// One bounded read of a /proc file (never blocks on the target).
std::string ProcessStateName(pid_t pid);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_PROCESS_STATE_H_
