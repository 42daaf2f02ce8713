// How thrifty the node's agent asks the library to be: 0 (not at all) to
// GF_THRIFT_SITES. An agent over its budget for gpuflame's time inside the
// profiled processes (profiler/pipeline/guardrails.h) holds one more of our
// thrift sites per step of its overhead ladder, and their shared semaphore
// counts them (GF_THRIFT_SITES in bpf/gpuflame_abi.h says why sites, not a
// value written into us: the kernel takes the count back down when the
// agent detaches or dies). Read on the flusher's tick by the tensor hook's
// sampler (tensor_events.cc) and CUPTI's activity cycle
// (cupti/kernel_time_cupti.cc); any thread may call.
#ifndef GPUFLAME_INPROCESS_THRIFT_H_
#define GPUFLAME_INPROCESS_THRIFT_H_

#include <cstdint>

extern "C" {
// Exported (the agent finds them in .dynsym, also in a stripped library).
extern unsigned short gpuflame_thrift_semaphore;
void gpuflame_thrift_sites();  // never called: GF_THRIFT_SITES nops, then ret
}

namespace gpuflame::inprocess {

// The count, bounded: a count past the sites (a bug, or memory the process
// wrote) is the highest level, never a shift the hook cannot take.
uint32_t ThriftLevel();

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_THRIFT_H_
