// The names of the CUDA API calls the injection library sends as spans
// (gf_api_record: a CUPTI callback domain and ID), for the timeline, and of
// those a launch's stack is taken in (GF_LAUNCH_API), for its leaf. The
// IDs are CUPTI's (cupti_runtime_cbid.h, cupti_driver_cbid.h), which CUPTI
// never renumbers: new calls get new IDs. Written out here because the
// agent builds without CUPTI's headers, and the library sends only these
// (cupti/kernel_time_cupti.cc's IsLaunch and IsMemoryCall).
#ifndef GPUFLAME_PROFILER_RESOLVE_CUDA_API_NAME_H_
#define GPUFLAME_PROFILER_RESOLVE_CUDA_API_NAME_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuflame::profiler {

inline constexpr uint8_t kCuptiDriverDomain = 1;   // CUPTI_CB_DOMAIN_DRIVER_API
inline constexpr uint8_t kCuptiRuntimeDomain = 2;  // CUPTI_CB_DOMAIN_RUNTIME_API

// "cudaLaunchKernel", "cuGraphLaunch", ...; "[runtime call 123]" for another ID.
std::string CudaApiName(uint8_t domain, uint16_t cbid);
// The same, empty for an ID not in the table.
std::string_view KnownCudaApiName(uint8_t domain, uint16_t cbid);

// What the call does to the GPU, for the name of its span. A device
// allocation's or free's span takes its bytes and stack from the eBPF
// memory event inside it (kAlloc, kFree); host allocations, address
// reservations and mappings have none (the probes do not follow them).
enum class CudaApiKind : uint8_t {
  kOther,
  kLaunch,
  kGraphLaunch,
  kMemcpy,
  kMemset,
  kAlloc,      // device memory (or a physical handle: cuMemCreate)
  kFree,       // its release
  kHostAlloc,  // pinned host memory
  kHostFree,
  kAddress,  // a virtual address range reserved or freed
  kMap,      // physical memory mapped into or unmapped from a range
};
CudaApiKind CudaApiKindOf(uint8_t domain, uint16_t cbid);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_RESOLVE_CUDA_API_NAME_H_
