// The names of the CUDA API calls the injection library sends as spans
// (gf_api_record: a CUPTI callback domain and ID), for the timeline. The
// IDs are CUPTI's (cupti_runtime_cbid.h, cupti_driver_cbid.h), which CUPTI
// never renumbers: new calls get new IDs. Written out here because the
// agent builds without CUPTI's headers, and the library sends only these
// (cupti/kernel_time_cupti.cc's IsLaunch).
#ifndef GPUFLAME_PROFILER_TIMELINE_CUDA_API_NAME_H_
#define GPUFLAME_PROFILER_TIMELINE_CUDA_API_NAME_H_

#include <cstdint>
#include <string>

namespace gpuflame::profiler::timeline {

inline constexpr uint8_t kCuptiDriverDomain = 1;   // CUPTI_CB_DOMAIN_DRIVER_API
inline constexpr uint8_t kCuptiRuntimeDomain = 2;  // CUPTI_CB_DOMAIN_RUNTIME_API

// "cudaLaunchKernel", "cuGraphLaunch", ...; "[runtime call 123]" for another ID.
std::string CudaApiName(uint8_t domain, uint16_t cbid);

// What the call does to the GPU, for the name of its span.
enum class CudaApiKind : uint8_t { kOther, kLaunch, kGraphLaunch, kMemcpy, kMemset };
CudaApiKind CudaApiKindOf(uint8_t domain, uint16_t cbid);

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_CUDA_API_NAME_H_
