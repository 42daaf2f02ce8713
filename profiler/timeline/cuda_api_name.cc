#include "profiler/timeline/cuda_api_name.h"

#include "absl/strings/str_cat.h"

namespace gpuflame::profiler::timeline {
namespace {

struct Known {
  uint8_t domain;
  uint16_t cbid;
  const char* name;
  CudaApiKind kind;
};

constexpr Known kKnown[] = {
    {kCuptiRuntimeDomain, 31, "cudaMemcpy", CudaApiKind::kMemcpy},
    {kCuptiRuntimeDomain, 41, "cudaMemcpyAsync", CudaApiKind::kMemcpy},
    {kCuptiRuntimeDomain, 49, "cudaMemset", CudaApiKind::kMemset},
    {kCuptiRuntimeDomain, 51, "cudaMemsetAsync", CudaApiKind::kMemset},
    {kCuptiRuntimeDomain, 211, "cudaLaunchKernel", CudaApiKind::kLaunch},
    {kCuptiRuntimeDomain, 214, "cudaLaunchKernel_ptsz", CudaApiKind::kLaunch},
    {kCuptiRuntimeDomain, 215, "cudaMemcpy_ptds", CudaApiKind::kMemcpy},
    {kCuptiRuntimeDomain, 225, "cudaMemcpyAsync_ptsz", CudaApiKind::kMemcpy},
    {kCuptiRuntimeDomain, 233, "cudaMemset_ptds", CudaApiKind::kMemset},
    {kCuptiRuntimeDomain, 235, "cudaMemsetAsync_ptsz", CudaApiKind::kMemset},
    {kCuptiRuntimeDomain, 269, "cudaLaunchCooperativeKernel", CudaApiKind::kLaunch},
    {kCuptiRuntimeDomain, 270, "cudaLaunchCooperativeKernel_ptsz", CudaApiKind::kLaunch},
    {kCuptiRuntimeDomain, 311, "cudaGraphLaunch", CudaApiKind::kGraphLaunch},
    {kCuptiRuntimeDomain, 312, "cudaGraphLaunch_ptsz", CudaApiKind::kGraphLaunch},
    {kCuptiRuntimeDomain, 430, "cudaLaunchKernelExC", CudaApiKind::kLaunch},
    {kCuptiRuntimeDomain, 431, "cudaLaunchKernelExC_ptsz", CudaApiKind::kLaunch},
    {kCuptiDriverDomain, 307, "cuLaunchKernel", CudaApiKind::kLaunch},
    {kCuptiDriverDomain, 442, "cuLaunchKernel_ptsz", CudaApiKind::kLaunch},
    {kCuptiDriverDomain, 477, "cuLaunchCooperativeKernel", CudaApiKind::kLaunch},
    {kCuptiDriverDomain, 478, "cuLaunchCooperativeKernel_ptsz", CudaApiKind::kLaunch},
    {kCuptiDriverDomain, 514, "cuGraphLaunch", CudaApiKind::kGraphLaunch},
    {kCuptiDriverDomain, 515, "cuGraphLaunch_ptsz", CudaApiKind::kGraphLaunch},
    {kCuptiDriverDomain, 652, "cuLaunchKernelEx", CudaApiKind::kLaunch},
    {kCuptiDriverDomain, 653, "cuLaunchKernelEx_ptsz", CudaApiKind::kLaunch},
};

const Known* Find(uint8_t domain, uint16_t cbid) {
  for (const Known& k : kKnown)
    if (k.domain == domain && k.cbid == cbid) return &k;
  return nullptr;
}

}  // namespace

std::string CudaApiName(uint8_t domain, uint16_t cbid) {
  if (const Known* k = Find(domain, cbid)) return k->name;
  return absl::StrCat(domain == kCuptiDriverDomain ? "[driver call " : "[runtime call ", cbid, "]");
}

CudaApiKind CudaApiKindOf(uint8_t domain, uint16_t cbid) {
  const Known* k = Find(domain, cbid);
  return k ? k->kind : CudaApiKind::kOther;
}

}  // namespace gpuflame::profiler::timeline
