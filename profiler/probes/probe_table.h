// What gpuflame hooks, in one table: for each library kind, the functions,
// the BPF program that serves them and the API id passed as attach cookie.
// Checked on an H200 host (PyTorch 2.11 wheels, CUDA 13): libcudart and
// libcuda export every CUDA symbol below (cudart forwards each cudaMalloc to
// cuMemAlloc_v2, hence the forwarding flag); libc10_cuda.so carries the
// semaphore-guarded USDT pytorch:malloc/free notes; libc10.so exports
// c10::reportMemoryUsageToProfiler, called on every caching-allocator
// alloc and free, and c10::reportOutOfMemoryToProfiler, called only before
// an OutOfMemoryError (both attached by process_registry.cc, beside each
// other). The libraries live under site-packages, not a fixed path.
// NCCL: every API of nccl.h below is exported by libnccl.so.2 (2.28.9 in the
// torch 2.11 wheel's nvidia-nccl-cu13; nccl* weak, pnccl* the same code, so
// one name per address is probed).
#ifndef GPUFLAME_PROFILER_PROBES_PROBE_TABLE_H_
#define GPUFLAME_PROFILER_PROBES_PROBE_TABLE_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

enum class LibraryKind : uint8_t {
  kCudaRuntime,  // libcudart.so*
  kCudaDriver,   // libcuda.so*
  kTorchCuda,    // libc10_cuda.so: USDT pytorch:malloc / pytorch:free
  kTorchCore,    // libc10.so: c10::reportMemoryUsageToProfiler fallback
  kPython,       // libpython3.X.so or a statically linked python executable
  kCupti,        // libgpuflame_cupti.so: USDT gpuflame:* (kernel launches and activity)
  kTorchAutograd,  // libtorch_cpu.so: torch::autograd::Engine::execute (whom engine threads work for)
  kNccl,           // libnccl.so*: every NCCL API call (profiler/collectives/)
};

enum class ProbeProgram : uint8_t {
  kAllocEnter,
  kAllocExit,
  kFreeEnter,
  kFreeExit,
  kMapEnter,
  kMapExit,
  kTorchReport,
  kPyFinalize,
  kKernelLaunch,   // USDT gpuflame:launch
  kKernelBatch,    // USDT gpuflame:kernel_batch
  kKernelName,     // USDT gpuflame:kernel_name
  kCuptiStatus,    // USDT gpuflame:status
  kTensorBatch,    // USDT gpuflame:tensor_batch (in-process tensor events)
  kUsdtSwitch,     // a gpuflame USDT switch (gpu_activity.bpf.h): its semaphore, never hit
  kLibCost,        // USDT gpuflame:lib_cost: the library's own cost in its process
  kHello,          // a hello site of the library (GF_HELLO_SITES): its semaphore, never hit
  kEngineExecute,  // torch::autograd::Engine::execute's entry: a backward() caller
  kTorchOom,       // c10::reportOutOfMemoryToProfiler: PyTorch is about to raise OutOfMemoryError
  kNcclEnter,      // an NCCL API's entry: the call, with its stack
  kNcclExit,       // its return
  kCudaSyncEnter,  // a CUDA synchronise call's entry: remembered per thread
  kCudaSyncExit,   // its return: the wait, with its stack
  kApiBatch,       // USDT gpuflame:api_batch: CUDA API calls, entry to return (the timeline's)
  kThrift,         // a thrift site of the library (GF_THRIFT_SITES): its semaphore, never hit
  kLaunchEntry,    // one of libcuda's launch entry points: the launch route's stacks
  kLaunchWindow,   // USDT gpuflame:launch_window: the library's launch window opened or closed
  kLaunchRecords,  // USDT gpuflame:launch_records: the driver's launch calls, as CUPTI recorded them
};

struct UprobeSpec {
  LibraryKind library;
  std::string_view symbol;
  gf_api api;
  ProbeProgram entry;
  bool has_exit;  // also a return probe (same program family's exit)
  ProbeProgram exit;
};

std::span<const UprobeSpec> UprobeSpecs();

// The launch route's uprobes: libcuda's exported functions that submit GPU
// work (launches, copies, memsets), each with its CUPTI driver callback ID,
// which the library's launch records carry: GF_LAUNCH_ROUTE_ENTRIES
// (bpf/gpuflame_abi.h), whose IDs the library checks against CUPTI's header
// (the agent builds without it).
struct LaunchEntry {
  std::string_view symbol;
  uint16_t cbid;
};
std::span<const LaunchEntry> LaunchEntries();

// The leaf frame name of an API, e.g. "cudaMalloc".
std::string_view ApiName(uint16_t api);
// c10::reportMemoryUsageToProfiler(void*, long, unsigned long, unsigned long, c10::Device)
inline constexpr std::string_view kTorchReportSymbol =
    "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE";

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_PROBE_TABLE_H_
