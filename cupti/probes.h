// The USDT probes libgpuflame_cupti.so fires for the agent (provider
// `gpuflame`), each guarded by a semaphore the kernel raises while a tracer
// is attached: with no agent, a launch costs one load and branch here.
// Arguments are plain integers and pointers to bpf/gpuflame_abi.h structs.
//
// The library is built separately from the agent and may meet an agent of
// another version: gpuflame:status carries the GF_ABI_VERSION it was built
// with, and the agent checks it (it ignores the process's kernel records on
// a mismatch, and says so). The check cannot live here: USDT is one-way and
// the semaphores only say that some tracer is attached, not which version,
// so the library never learns the agent's ABI and never steps aside for it.
#ifndef GPUFLAME_CUPTI_PROBES_H_
#define GPUFLAME_CUPTI_PROBES_H_

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#include "bpf/gpuflame_abi.h"

extern "C" {
extern unsigned short gpuflame_launch_semaphore;
extern unsigned short gpuflame_kernel_batch_semaphore;
extern unsigned short gpuflame_kernel_name_semaphore;
extern unsigned short gpuflame_status_semaphore;
extern unsigned short gpuflame_kernel_time_exact_semaphore;
extern unsigned short gpuflame_lib_cost_semaphore;
extern unsigned short gpuflame_api_batch_semaphore;
extern unsigned short gpuflame_launch_route_semaphore;
extern unsigned short gpuflame_launch_records_semaphore;
extern unsigned short gpuflame_launch_window_semaphore;
extern unsigned short gpuflame_flushed_semaphore;
}

namespace gpuflame::cupti {

inline bool LaunchProbeOn() { return __builtin_expect(gpuflame_launch_semaphore != 0, 0); }
inline bool BatchProbeOn() { return gpuflame_kernel_batch_semaphore != 0; }

// A sampled launch, in the callback for |api| (GF_LAUNCH_API): the agent
// takes this thread's stack here. From a thread that runs no Python while
// backward() runs: the caller's stack ID if one call runs, and how many run
// (inprocess/autograd_origin.h); else 0, 0.
inline void FireLaunch(unsigned int correlation, unsigned int api, unsigned long origin = 0,
                       unsigned int concurrent = 0) {
  DTRACE_PROBE4(gpuflame, launch, correlation, api, origin, concurrent);
}
inline void FireBatch(const void* records, unsigned long count) {
  if (BatchProbeOn()) DTRACE_PROBE2(gpuflame, kernel_batch, records, count);
}
// Whether an agent wants CUDA API calls as spans (record --timeline).
inline bool ApiProbeOn() { return __builtin_expect(gpuflame_api_batch_semaphore != 0, 0); }
inline void FireApiBatch(const void* records, unsigned long count, unsigned long dropped) {
  if (ApiProbeOn()) DTRACE_PROBE3(gpuflame, api_batch, records, count, dropped);
}
inline void FireName(unsigned int id, const char* name) {
  if (gpuflame_kernel_name_semaphore) DTRACE_PROBE2(gpuflame, kernel_name, id, name);
}
// Whether an agent takes launch stacks itself, at libcuda's launch entry
// points (the launch route, bpf/gpuflame_abi.h): a switch, never fired.
inline bool LaunchRouteOn() { return gpuflame_launch_route_semaphore != 0; }
// The driver's launch calls, as CUPTI recorded them in a launch window.
inline void FireLaunchRecords(const void* records, unsigned long count, unsigned long unconverted) {
  if (gpuflame_launch_records_semaphore) DTRACE_PROBE3(gpuflame, launch_records, records, count, unconverted);
}
// A launch window opened (1) or closed (0): the agent's uprobes follow it.
inline void FireLaunchWindow(unsigned int open) {
  if (gpuflame_launch_window_semaphore) DTRACE_PROBE1(gpuflame, launch_window, open);
}
// Whether an agent asks for a flush now: it holds gpuflame:flushed, whose
// semaphore the kernel writes from outside, so it is read anew.
inline bool FlushAsked() { return *static_cast<volatile unsigned short*>(&gpuflame_flushed_semaphore) != 0; }
// The answer: what the flush handed out on this thread is in the agent's
// ring before it. gpuflame:status's arguments, so that an agent reads both
// with one program.
inline void FireFlushed() {
  if (FlushAsked())
    DTRACE_PROBE5(gpuflame, flushed, static_cast<unsigned int>(GF_CUPTI_FLUSHED),
                  static_cast<unsigned int>(GF_ABI_VERSION), 0ul, 0ul, 0ul);
}
inline bool StatusProbeOn() { return gpuflame_status_semaphore != 0; }
// What the library did (enum gf_cupti_status), with the ABI it speaks, and
// where CUPTI's clock is: |cupti_ns| read between two CLOCK_MONOTONIC reads
// (0, 0, 0: not read). The agent's timeline puts GPU records on its own
// clock through these pairs (gf_status_clock in bpf/gpuflame_abi.h).
inline void FireStatus(unsigned int status, unsigned long cupti_ns = 0, unsigned long mono_before_ns = 0,
                       unsigned long mono_after_ns = 0) {
  if (StatusProbeOn())
    DTRACE_PROBE5(gpuflame, status, status, static_cast<unsigned int>(GF_ABI_VERSION), cupti_ns, mono_before_ns,
                  mono_after_ns);
}

// What the library has cost its process so far (GF_EV_LIB_COST).
inline void FireLibCost(unsigned long hook_calls, unsigned long hook_ns, unsigned long callback_ns,
                        unsigned long thread_ns, unsigned long cupti_ns) {
  if (gpuflame_lib_cost_semaphore) DTRACE_PROBE5(gpuflame, lib_cost, hook_calls, hook_ns, callback_ns, thread_ns, cupti_ns);
}

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_PROBES_H_
