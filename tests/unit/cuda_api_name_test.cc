// The timeline's names of the CUDA calls the library sends as spans
// (profiler/resolve/cuda_api_name.h), checked against CUPTI's own IDs: the
// agent names them without CUPTI's headers, so a renumbered or missing ID
// shows here.
#include "profiler/resolve/cuda_api_name.h"

#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include "profiler/probes/probe_table.h"

namespace gpuflame::profiler {
namespace {

TEST(CudaApiNameTest, NamesEveryCallTheLibrarySendsByCuptisIds) {
  static_assert(kCuptiDriverDomain == CUPTI_CB_DOMAIN_DRIVER_API);
  static_assert(kCuptiRuntimeDomain == CUPTI_CB_DOMAIN_RUNTIME_API);
#define DRIVER(name, kind)                                                           \
  EXPECT_EQ(CudaApiName(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_##name), #name); \
  EXPECT_EQ(CudaApiKindOf(kCuptiDriverDomain, CUPTI_DRIVER_TRACE_CBID_##name), kind)
  // The names drop CUPTI's version suffix (_v7000): the call's name.
  auto runtime = [](CUpti_CallbackId id) { return CudaApiName(kCuptiRuntimeDomain, static_cast<uint16_t>(id)); };
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), "cudaLaunchKernel");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000), "cudaLaunchKernel_ptsz");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060), "cudaLaunchKernelExC");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060), "cudaLaunchKernelExC_ptsz");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000), "cudaLaunchCooperativeKernel");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000),
            "cudaLaunchCooperativeKernel_ptsz");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000), "cudaGraphLaunch");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000), "cudaGraphLaunch_ptsz");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020), "cudaMemcpy");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000), "cudaMemcpy_ptds");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020), "cudaMemcpyAsync");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020), "cudaMemset");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000), "cudaMemset_ptds");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020), "cudaMemsetAsync");
  EXPECT_EQ(runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000), "cudaMemsetAsync_ptsz");
  // The launch route's entry points, by CUPTI's IDs for their names: the
  // library checks the list's IDs at compile time; this, the agent's names.
#define ROUTE(name, cbid, kind) DRIVER(name, CudaApiKind::k##kind);
  GF_LAUNCH_ROUTE_ENTRIES(ROUTE)
#undef ROUTE
  DRIVER(cuLaunchKernel, CudaApiKind::kLaunch);
  DRIVER(cuGraphLaunch_ptsz, CudaApiKind::kGraphLaunch);
  DRIVER(cuMemcpyDtoHAsync_v2, CudaApiKind::kMemcpy);
  DRIVER(cuMemsetD32Async_ptsz, CudaApiKind::kMemset);
  // The agent's uprobes go on the symbols so named.
  ASSERT_EQ(LaunchEntries().size(), 36u);
  for (const LaunchEntry& e : LaunchEntries()) EXPECT_EQ(KnownCudaApiName(kCuptiDriverDomain, e.cbid), e.symbol);
  EXPECT_EQ(CudaApiKindOf(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020), CudaApiKind::kMemcpy);
  EXPECT_EQ(CudaApiKindOf(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020), CudaApiKind::kMemset);
  // Device memory calls: every ID the library's IsMemoryCall enables.
#define RUNTIME(id, name, kind)                                                               \
  EXPECT_EQ(CudaApiName(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_##id), name);           \
  EXPECT_EQ(CudaApiKindOf(kCuptiRuntimeDomain, CUPTI_RUNTIME_TRACE_CBID_##id), CudaApiKind::kind)
  RUNTIME(cudaMalloc_v3020, "cudaMalloc", kAlloc);
  RUNTIME(cudaMallocPitch_v3020, "cudaMallocPitch", kAlloc);
  RUNTIME(cudaFree_v3020, "cudaFree", kFree);
  RUNTIME(cudaMallocHost_v3020, "cudaMallocHost", kHostAlloc);
  RUNTIME(cudaFreeHost_v3020, "cudaFreeHost", kHostFree);
  RUNTIME(cudaHostAlloc_v3020, "cudaHostAlloc", kHostAlloc);
  RUNTIME(cudaMallocManaged_v6000, "cudaMallocManaged", kAlloc);
  RUNTIME(cudaMallocAsync_v11020, "cudaMallocAsync", kAlloc);
  RUNTIME(cudaMallocAsync_ptsz_v11020, "cudaMallocAsync_ptsz", kAlloc);
  RUNTIME(cudaFreeAsync_v11020, "cudaFreeAsync", kFree);
  RUNTIME(cudaFreeAsync_ptsz_v11020, "cudaFreeAsync_ptsz", kFree);
  RUNTIME(cudaMallocFromPoolAsync_v11020, "cudaMallocFromPoolAsync", kAlloc);
  RUNTIME(cudaMallocFromPoolAsync_ptsz_v11020, "cudaMallocFromPoolAsync_ptsz", kAlloc);
  DRIVER(cuMemFreeHost, CudaApiKind::kHostFree);
  DRIVER(cuMemHostAlloc, CudaApiKind::kHostAlloc);
  DRIVER(cuMemAlloc_v2, CudaApiKind::kAlloc);
  DRIVER(cuMemAllocPitch_v2, CudaApiKind::kAlloc);
  DRIVER(cuMemFree_v2, CudaApiKind::kFree);
  DRIVER(cuMemAllocHost_v2, CudaApiKind::kHostAlloc);
  DRIVER(cuMemAllocManaged, CudaApiKind::kAlloc);
  DRIVER(cuMemAddressReserve, CudaApiKind::kAddress);
  DRIVER(cuMemAddressFree, CudaApiKind::kAddress);
  DRIVER(cuMemCreate, CudaApiKind::kAlloc);
  DRIVER(cuMemRelease, CudaApiKind::kFree);
  DRIVER(cuMemMap, CudaApiKind::kMap);
  DRIVER(cuMemUnmap, CudaApiKind::kMap);
  DRIVER(cuMemAllocAsync, CudaApiKind::kAlloc);
  DRIVER(cuMemAllocAsync_ptsz, CudaApiKind::kAlloc);
  DRIVER(cuMemFreeAsync, CudaApiKind::kFree);
  DRIVER(cuMemFreeAsync_ptsz, CudaApiKind::kFree);
  DRIVER(cuMemAllocFromPoolAsync, CudaApiKind::kAlloc);
  DRIVER(cuMemAllocFromPoolAsync_ptsz, CudaApiKind::kAlloc);
#undef RUNTIME
  // Another ID is named by its number, not guessed.
  EXPECT_EQ(CudaApiName(kCuptiRuntimeDomain, 1), "[runtime call 1]");
  EXPECT_EQ(CudaApiKindOf(kCuptiDriverDomain, 1), CudaApiKind::kOther);
#undef DRIVER
}

}  // namespace
}  // namespace gpuflame::profiler
