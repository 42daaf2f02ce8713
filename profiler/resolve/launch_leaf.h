// The top of a kernel launch's native stack. The injection library takes a
// launch's stack in the driver's launch call (cupti/kernel_time_cupti.cc),
// also where the workload called the runtime's: above the API the workload
// called sit CUDA's own frames (the runtime's and the driver's, internal
// ones included), which say nothing of the workload.
#ifndef GPUFLAME_PROFILER_RESOLVE_LAUNCH_LEAF_H_
#define GPUFLAME_PROFILER_RESOLVE_LAUNCH_LEAF_H_

#include <cstdint>
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

// Names the leaf from |launch_api| (GF_LAUNCH_API: the CUPTI callback the
// stack was taken in) where it is a frame of CUDA's with no symbol. A
// runtime linked statically into another library (cuDNN's) enters the
// driver through entry points libcuda does not export, for its launches
// and for CUPTI's runtime callbacks alike: its launches and memsets unwind
// to `libcuda.so.580+0x4cb045` under cuDNN's frames, while CUPTI knows the
// call was cuLaunchKernel or cudaMemsetAsync. A named leaf stays (it is what
// the workload called: cudaLaunchKernel over the driver's callback), and so
// does any leaf when the API is not known.
void NameUnnamedLaunchLeaf(std::vector<symbolizer::Frame>& native, uint32_t launch_api);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_RESOLVE_LAUNCH_LEAF_H_
