#include "profiler/resolve/cuda_api_name.h"

#include "absl/strings/str_cat.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {
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
// The launch route's entry points (bpf/gpuflame_abi.h): launches, copies, memsets.
#define GF_LAUNCH_ENTRY(name, cbid, kind) {kCuptiDriverDomain, cbid, #name, CudaApiKind::k##kind},
    GF_LAUNCH_ROUTE_ENTRIES(GF_LAUNCH_ENTRY)
#undef GF_LAUNCH_ENTRY
    // Device memory calls (the library's IsMemoryCall).
    {kCuptiRuntimeDomain, 20, "cudaMalloc", CudaApiKind::kAlloc},
    {kCuptiRuntimeDomain, 21, "cudaMallocPitch", CudaApiKind::kAlloc},
    {kCuptiRuntimeDomain, 22, "cudaFree", CudaApiKind::kFree},
    {kCuptiRuntimeDomain, 25, "cudaMallocHost", CudaApiKind::kHostAlloc},
    {kCuptiRuntimeDomain, 26, "cudaFreeHost", CudaApiKind::kHostFree},
    {kCuptiRuntimeDomain, 27, "cudaHostAlloc", CudaApiKind::kHostAlloc},
    {kCuptiRuntimeDomain, 206, "cudaMallocManaged", CudaApiKind::kAlloc},
    {kCuptiRuntimeDomain, 373, "cudaMallocAsync", CudaApiKind::kAlloc},
    {kCuptiRuntimeDomain, 374, "cudaMallocAsync_ptsz", CudaApiKind::kAlloc},
    {kCuptiRuntimeDomain, 375, "cudaFreeAsync", CudaApiKind::kFree},
    {kCuptiRuntimeDomain, 376, "cudaFreeAsync_ptsz", CudaApiKind::kFree},
    {kCuptiRuntimeDomain, 391, "cudaMallocFromPoolAsync", CudaApiKind::kAlloc},
    {kCuptiRuntimeDomain, 392, "cudaMallocFromPoolAsync_ptsz", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 38, "cuMemFreeHost", CudaApiKind::kHostFree},
    {kCuptiDriverDomain, 39, "cuMemHostAlloc", CudaApiKind::kHostAlloc},
    {kCuptiDriverDomain, 243, "cuMemAlloc_v2", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 244, "cuMemAllocPitch_v2", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 245, "cuMemFree_v2", CudaApiKind::kFree},
    {kCuptiDriverDomain, 294, "cuMemAllocHost_v2", CudaApiKind::kHostAlloc},
    {kCuptiDriverDomain, 371, "cuMemAllocManaged", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 547, "cuMemAddressReserve", CudaApiKind::kAddress},
    {kCuptiDriverDomain, 548, "cuMemAddressFree", CudaApiKind::kAddress},
    {kCuptiDriverDomain, 549, "cuMemCreate", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 550, "cuMemRelease", CudaApiKind::kFree},
    {kCuptiDriverDomain, 551, "cuMemMap", CudaApiKind::kMap},
    {kCuptiDriverDomain, 552, "cuMemUnmap", CudaApiKind::kMap},
    {kCuptiDriverDomain, 598, "cuMemAllocAsync", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 599, "cuMemAllocAsync_ptsz", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 600, "cuMemFreeAsync", CudaApiKind::kFree},
    {kCuptiDriverDomain, 601, "cuMemFreeAsync_ptsz", CudaApiKind::kFree},
    {kCuptiDriverDomain, 611, "cuMemAllocFromPoolAsync", CudaApiKind::kAlloc},
    {kCuptiDriverDomain, 612, "cuMemAllocFromPoolAsync_ptsz", CudaApiKind::kAlloc},
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

std::string_view KnownCudaApiName(uint8_t domain, uint16_t cbid) {
  const Known* k = Find(domain, cbid);
  return k ? k->name : std::string_view();
}

CudaApiKind CudaApiKindOf(uint8_t domain, uint16_t cbid) {
  const Known* k = Find(domain, cbid);
  return k ? k->kind : CudaApiKind::kOther;
}

}  // namespace gpuflame::profiler
