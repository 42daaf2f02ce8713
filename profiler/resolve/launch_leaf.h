// The top of a kernel launch's native stack. The injection library takes a
// launch's stack in the driver's launch call (cupti/kernel_time_cupti.cc),
// also where the workload called the runtime's: above the API the workload
// called sit CUDA's own frames (the runtime's and the driver's, internal
// ones included), which say nothing of the workload.
#ifndef GPUFLAME_PROFILER_RESOLVE_LAUNCH_LEAF_H_
#define GPUFLAME_PROFILER_RESOLVE_LAUNCH_LEAF_H_

#include <string_view>
#include <vector>

#include "symbolizer/frame.h"

namespace gpuflame::profiler {

// Whether |file| (a path) is CUDA's runtime or driver library.
bool IsCudaLibrary(std::string_view file);

// Of the run of CUDA's frames at the top of |native| (outermost first, the
// leaf last), only the outermost stays: the API the workload called
// (cudaLaunchKernel; cuBLAS's cuLaunchKernelEx, called from outside CUDA).
void KeepOutermostCudaFrame(std::vector<symbolizer::Frame>& native);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_RESOLVE_LAUNCH_LEAF_H_
