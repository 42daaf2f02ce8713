// What the in-process hook stands in for: PyTorch's
// c10::reportMemoryUsageToProfiler(void*, int64_t, size_t, size_t,
// c10::Device), defined in libc10.so and called from libc10_cuda.so on
// every caching-allocator alloc (+bytes) and free (-bytes).
#ifndef GPUFLAME_INPROCESS_TORCH_REPORT_H_
#define GPUFLAME_INPROCESS_TORCH_REPORT_H_

#include <cstddef>
#include <cstdint>

namespace gpuflame::inprocess {

// c10::Device, passed by value in one register.
struct TorchDevice {
  int8_t type;
  int8_t index;
};
using TorchReportFn = void (*)(void* ptr, int64_t delta, size_t allocated, size_t reserved, TorchDevice device);

inline constexpr const char* kTorchCudaLibrary = "libc10_cuda.so";
inline constexpr const char* kTorchReportSymbol = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE";

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_TORCH_REPORT_H_
