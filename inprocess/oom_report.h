// PyTorch's out-of-memory report, observed from inside the workload.
//
// When the CUDA caching allocator has freed its cache, retried, and still
// cannot allocate, it calls c10::reportOutOfMemoryToProfiler (libc10.so)
// from libc10_cuda.so, through its GOT, just before it throws
// OutOfMemoryError. That slot is pointed at a hook that calls the original
// and sends the report with the failing thread's stack at once
// (tensor_events.h: SendOomReport), in the same stream as the tensor events
// made before it, so the agent reads the tensor level as it was. Called only
// on an out-of-memory error: nothing is added to any other path.
#ifndef GPUFLAME_INPROCESS_OOM_REPORT_H_
#define GPUFLAME_INPROCESS_OOM_REPORT_H_

#include <cstddef>
#include <cstdint>

#include "bpf/gpuflame_abi.h"
#include "inprocess/torch_report.h"

namespace gpuflame::inprocess {

// void c10::reportOutOfMemoryToProfiler(int64_t alloc_size, size_t
// total_allocated, size_t total_reserved, c10::Device): GF_TORCH_OOM_SYMBOL,
// or with alloc_size size_t (GF_TORCH_OOM_SYMBOL_UNSIGNED): the same registers.
using TorchOomFn = void (*)(int64_t alloc_size, size_t allocated, size_t reserved, TorchDevice device);

// On the flusher thread, every tick: once the tensor hook is live, installs
// the hook (looked for once: a libc10_cuda.so without the slot is left
// alone), then patches the slot again if lazy binding wrote the original back.
void PollOomReport();

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_OOM_REPORT_H_
