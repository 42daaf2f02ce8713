// Whether the library's own thread is all that is left of the workload.
//
// A process ends when its last thread does (glibc's exit(0) on the last
// thread's way out), not when main() does if main() ended with
// pthread_exit and other threads went on. The library's flusher thread never
// ends on its own: left as the last thread, it would keep such a process
// alive for ever. The flusher asks this on each tick and, when it is alone,
// ends the process as the last thread would have.
#ifndef GPUFLAME_INPROCESS_LAST_THREAD_H_
#define GPUFLAME_INPROCESS_LAST_THREAD_H_

namespace gpuflame::inprocess {

// True when the thread-group leader has ended (a zombie, which the kernel
// still counts) and the only other thread is the caller: from
// /proc/self/stat, one bounded read. False when it cannot tell.
bool OnlyThisThreadLeft();

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_LAST_THREAD_H_
