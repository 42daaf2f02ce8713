// A process whose leader thread has ended (main() called pthread_exit)
// lives on in its other threads, and /proc/PID/stat then describes a
// zombie: its memory is gone and its state is 'Z' however the rest of the
// group runs or stops. These ask a live thread instead, for reading the
// process's memory (process_memory.h) and for telling whether a gate's stop
// has landed or is still to be resumed (profiler/process).
#ifndef GPUFLAME_INSPECT_THREAD_GROUP_H_
#define GPUFLAME_INSPECT_THREAD_GROUP_H_

#include <sys/types.h>

namespace gpuflame::inspect {

// A thread of |pid| whose memory can be read: the leader while it lives,
// else another that has not begun to exit, or 0. From /proc/PID/task (at
// most 4096 threads looked at).
pid_t LiveThreadOf(pid_t pid);

// The group's run state as /proc gives it ('R', 'S', 'T' ...): the
// leader's, or, where the leader has ended, a live thread's ('Z' when none
// lives); 0 when the process is gone or its stat unreadable.
char GroupState(pid_t pid);
// The same where the leader's state was read already (from its stat line).
char GroupState(pid_t pid, char leader_state);

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_THREAD_GROUP_H_
