// Kernel time, the injection library's CUPTI half: launch stacks through
// CUPTI's callbacks, GPU timelines through its activity API, duty-cycled
// (kernel_time_cupti.cc). A gpuflame built without CUPTI's headers has none
// (kernel_time_absent.cc) and says so to the agent; the library's other
// half, in-process tensor events, is the same in both (injection.cc).
// All on the flusher thread, but StartKernelTime (at cuInit, before the
// flusher runs) and the exit's final flush (on a helper thread, after the
// flusher has stopped).
#ifndef GPUFLAME_CUPTI_KERNEL_TIME_H_
#define GPUFLAME_CUPTI_KERNEL_TIME_H_

#include <cstdint>

namespace gpuflame::cupti {

// Starts it unless GPUFLAME_KERNEL_TIME=0. False when it is off for this
// process, said on stderr and to the agent (gpuflame:status) once.
// |start_ns|/|startup_ns|: the process's start, seen whole.
bool StartKernelTime(uint64_t start_ns, uint64_t startup_ns);
// Each tick while it is on: what is traced for the coming tick.
void KernelTimeTick(uint64_t now_ns);
// Each flush period: our ABI said again, then activity handed out.
void KernelTimeFlush();
// A new agent listens: kernel names go again, each at its next use.
void KernelTimeSayNamesAgain();

// What it has cost the process so far, for the agent's overhead budget.
struct KernelTimeCost {
  uint64_t callback_ns = 0;  // our CUPTI callbacks
  uint64_t buffer_ns = 0;    // activity buffers converted on CUPTI's threads
  uint64_t overhead_ns = 0;  // CUPTI's own OVERHEAD records
};
KernelTimeCost KernelTimeCostSoFar();

// At exit: a CUPTI detach asked and not yet taken is called off, and with
// |wait| one under way waited for (1 s at most; not in a forked child,
// where the thread that was detaching does not exist).
void KernelTimeCallOffDetach(bool wait);
// At exit: whether activity was ever on and CUPTI is still attached (then
// records may wait in CUPTI's buffers; it calls off a detach first), and the
// forced flush that hands them out.
bool KernelTimeNeedsFinalFlush();
void KernelTimeFinalFlush();
// At exit, after the flusher has stopped: the API spans it had not sent.
void KernelTimeLastApiSpans();
// GPUFLAME_CUPTI_DEBUG: what switching cost, at exit.
void KernelTimeTraceCosts();

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_KERNEL_TIME_H_
