// Whether a launched kernel is NCCL's, from the symbol name CUPTI hands the
// launch callback (CUpti_CallbackData::symbolName, valid for kernel
// launches of the runtime and driver APIs). NCCL's kernels are C++
// functions, so the name is mangled: `_Z39ncclDevKernel_AllReduce_Sum_f32_
// RING_LL24ncclDevKernelArgsStorageILm4096EE` (NCCL >= 2.19, src/device/
// common.h: `__global__ void ncclDevKernel_##suffix(ncclDevKernelArgs4K
// const args4K)`), `ncclSymkDevKernel_*` (symmetric kernels, 2.27+),
// `ncclKernel_*` (before 2.19); an extern "C" or already plain name is
// taken as well.
//
// Why it is worth a test on every launch: NCCL's launches are the only ones
// whose stack says which collective the GPU time belongs to, and they are
// few (one or a few per collective, against thousands of compute kernels a
// step), so every one is taken outside the launch sampler's budget
// (kernel_time_cupti.cc) and the kernels' GPU time is attributed back to
// the NCCL call exactly (profiler/collectives/nccl_gpu_time.h). The test
// reads at most ~20 bytes of a string CUPTI already has, with no
// allocation and no call: a few nanoseconds against the microseconds a
// launch costs. Any thread.
#ifndef GPUFLAME_CUPTI_NCCL_KERNEL_NAME_H_
#define GPUFLAME_CUPTI_NCCL_KERNEL_NAME_H_

namespace gpuflame::cupti {

namespace nccl_kernel_name_detail {
// |s| starts with |prefix| (a literal); reads no byte past a NUL of |s|.
inline bool StartsWith(const char* s, const char* prefix) {
  for (; *prefix; s++, prefix++)
    if (*s != *prefix) return false;
  return true;
}
}  // namespace nccl_kernel_name_detail

inline bool IsNcclKernelName(const char* name) {
  using nccl_kernel_name_detail::StartsWith;
  if (!name) return false;
  // A mangled name: `_Z`, the identifier's length (at most 3 digits here),
  // then the identifier.
  if (name[0] == '_' && name[1] == 'Z') {
    name += 2;
    for (int i = 0; i < 3 && *name >= '0' && *name <= '9'; i++) name++;
  }
  if (!StartsWith(name, "nccl")) return false;
  name += 4;
  return StartsWith(name, "DevKernel_") || StartsWith(name, "Kernel_") || StartsWith(name, "SymkDevKernel_");
}

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_NCCL_KERNEL_NAME_H_
