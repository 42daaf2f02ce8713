// The USDT probes libgpuflame_cupti.so fires for the agent (provider
// `gpuflame`), each guarded by a semaphore the kernel raises while a tracer
// is attached: with no agent, a launch costs one load and branch here.
// Arguments are plain integers and pointers to bpf/gpuflame_abi.h structs.
#ifndef GPUFLAME_CUPTI_PROBES_H_
#define GPUFLAME_CUPTI_PROBES_H_

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

extern "C" {
extern unsigned short gpuflame_launch_semaphore;
extern unsigned short gpuflame_kernel_batch_semaphore;
extern unsigned short gpuflame_kernel_name_semaphore;
extern unsigned short gpuflame_status_semaphore;
}

namespace gpuflame::cupti {

inline bool LaunchProbeOn() { return __builtin_expect(gpuflame_launch_semaphore != 0, 0); }
inline bool BatchProbeOn() { return gpuflame_kernel_batch_semaphore != 0; }

// A sampled launch: the agent takes this thread's stack here.
inline void FireLaunch(unsigned int correlation, unsigned int cbid) {
  DTRACE_PROBE2(gpuflame, launch, correlation, cbid);
}
inline void FireBatch(const void* records, unsigned long count) {
  if (BatchProbeOn()) DTRACE_PROBE2(gpuflame, kernel_batch, records, count);
}
inline void FireName(unsigned int id, const char* name) {
  if (gpuflame_kernel_name_semaphore) DTRACE_PROBE2(gpuflame, kernel_name, id, name);
}
inline void FireStatus(unsigned int status) {
  if (gpuflame_status_semaphore) DTRACE_PROBE1(gpuflame, status, status);
}

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_PROBES_H_
