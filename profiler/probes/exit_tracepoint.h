// Which exit hook this kernel can run (bpf/process_lifecycle.bpf.h): where
// sched_process_exit passes group_dead (6.18 does), a process ends with its
// last thread; before, with its leader's exit.
#ifndef GPUFLAME_PROFILER_PROBES_EXIT_TRACEPOINT_H_
#define GPUFLAME_PROFILER_PROBES_EXIT_TRACEPOINT_H_

namespace gpuflame::profiler {

// Whether the kernel's sched_process_exit tracepoint passes group_dead,
// from its BTF (the tracepoint's prototype: the tracepoint's data, the task,
// group_dead). Read once and cached; false where the BTF cannot be read.
bool ExitTracepointPassesGroupDead();

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_EXIT_TRACEPOINT_H_
