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
//
// Here, beside the ABI, because both sides apply the one rule: the library
// to pick the launches it takes, the agent to count NCCL kernels whose
// launch it could not join (nccl_gpu_time.cc). C++ only.
#ifndef GPUFLAME_BPF_NCCL_KERNEL_NAME_H_
#define GPUFLAME_BPF_NCCL_KERNEL_NAME_H_

#include <cstddef>
#include <cstdint>

namespace gpuflame {

namespace nccl_kernel_name_detail {
// |s| (at most |n| bytes, or up to its NUL) starts with |prefix| (a literal).
inline bool StartsWith(const char* s, size_t n, const char* prefix) {
  for (size_t i = 0; prefix[i]; i++)
    if (i >= n || s[i] != prefix[i]) return false;
  return true;
}
}  // namespace nccl_kernel_name_detail

// |name|: at most |n| bytes, or up to its NUL, whichever comes first (the
// library passes CUPTI's NUL-terminated string without a strlen).
inline bool IsNcclKernelName(const char* name, size_t n = SIZE_MAX) {
  using nccl_kernel_name_detail::StartsWith;
  if (!name) return false;
  // A mangled name: `_Z`, the identifier's length (at most 3 digits here),
  // then the identifier.
  if (StartsWith(name, n, "_Z")) {
    name += 2;
    n -= 2;
    for (int i = 0; i < 3 && n > 0 && *name >= '0' && *name <= '9'; i++, n--) name++;
  }
  if (!StartsWith(name, n, "nccl")) return false;
  name += 4;
  n -= 4;
  return StartsWith(name, n, "DevKernel_") || StartsWith(name, n, "Kernel_") || StartsWith(name, n, "SymkDevKernel_");
}

}  // namespace gpuflame

#endif  // GPUFLAME_BPF_NCCL_KERNEL_NAME_H_
