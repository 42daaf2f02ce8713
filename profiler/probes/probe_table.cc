#include "profiler/probes/probe_table.h"

#include <array>

namespace gpuflame::profiler {
namespace {

using K = LibraryKind;
using P = ProbeProgram;

constexpr std::array kSpecs = {
    // Runtime API: entry stores the call, return emits it unless the driver
    // call inside it already did (so device bytes are counted once).
    UprobeSpec{K::kCudaRuntime, "cudaMalloc", GF_API_CUDA_MALLOC, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaRuntime, "cudaMallocAsync", GF_API_CUDA_MALLOC_ASYNC, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaRuntime, "cudaMallocManaged", GF_API_CUDA_MALLOC_MANAGED, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaRuntime, "cudaFree", GF_API_CUDA_FREE, P::kFreeEnter, true, P::kFreeExit},
    UprobeSpec{K::kCudaRuntime, "cudaFreeAsync", GF_API_CUDA_FREE_ASYNC, P::kFreeEnter, true, P::kFreeExit},
    // Driver API: what the device actually handed out.
    UprobeSpec{K::kCudaDriver, "cuMemAlloc_v2", GF_API_CU_MEM_ALLOC, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaDriver, "cuMemAllocAsync", GF_API_CU_MEM_ALLOC_ASYNC, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaDriver, "cuMemAllocManaged", GF_API_CU_MEM_ALLOC_MANAGED, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaDriver, "cuMemAllocPitch_v2", GF_API_CU_MEM_ALLOC_PITCH, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaDriver, "cuMemCreate", GF_API_CU_MEM_CREATE, P::kAllocEnter, true, P::kAllocExit},
    UprobeSpec{K::kCudaDriver, "cuMemFree_v2", GF_API_CU_MEM_FREE, P::kFreeEnter, true, P::kFreeExit},
    UprobeSpec{K::kCudaDriver, "cuMemFreeAsync", GF_API_CU_MEM_FREE_ASYNC, P::kFreeEnter, true, P::kFreeExit},
    UprobeSpec{K::kCudaDriver, "cuMemRelease", GF_API_CU_MEM_RELEASE, P::kFreeEnter, true, P::kFreeExit},
    // A map is said once it succeeded; out of memory as an allocation's.
    UprobeSpec{K::kCudaDriver, "cuMemMap", GF_API_CU_MEM_MAP, P::kMapEnter, true, P::kMapExit},
    UprobeSpec{K::kCudaDriver, "cuMemUnmap", GF_API_CU_MEM_UNMAP, P::kMapEnter, false, P::kMapEnter},
    // Synchronise calls: how long a CPU thread waited for the GPU, and from
    // where (bpf/cuda_sync.bpf.h). The _ptsz names are the per-thread
    // default stream's builds of the same calls; cudaStreamWaitEvent makes
    // the GPU wait, not a CPU thread: not probed.
    UprobeSpec{K::kCudaRuntime, "cudaStreamSynchronize", GF_API_CUDA_STREAM_SYNC, P::kCudaSyncEnter, true,
               P::kCudaSyncExit},
    UprobeSpec{K::kCudaRuntime, "cudaStreamSynchronize_ptsz", GF_API_CUDA_STREAM_SYNC, P::kCudaSyncEnter, true,
               P::kCudaSyncExit},
    UprobeSpec{K::kCudaRuntime, "cudaDeviceSynchronize", GF_API_CUDA_DEVICE_SYNC, P::kCudaSyncEnter, true,
               P::kCudaSyncExit},
    UprobeSpec{K::kCudaRuntime, "cudaEventSynchronize", GF_API_CUDA_EVENT_SYNC, P::kCudaSyncEnter, true,
               P::kCudaSyncExit},
    UprobeSpec{K::kCudaDriver, "cuStreamSynchronize", GF_API_CU_STREAM_SYNC, P::kCudaSyncEnter, true,
               P::kCudaSyncExit},
    UprobeSpec{K::kCudaDriver, "cuStreamSynchronize_ptsz", GF_API_CU_STREAM_SYNC, P::kCudaSyncEnter, true,
               P::kCudaSyncExit},
    UprobeSpec{K::kCudaDriver, "cuCtxSynchronize", GF_API_CU_CTX_SYNC, P::kCudaSyncEnter, true, P::kCudaSyncExit},
    UprobeSpec{K::kCudaDriver, "cuCtxSynchronize_v2", GF_API_CU_CTX_SYNC, P::kCudaSyncEnter, true, P::kCudaSyncExit},
    UprobeSpec{K::kCudaDriver, "cuEventSynchronize", GF_API_CU_EVENT_SYNC, P::kCudaSyncEnter, true,
               P::kCudaSyncExit},
    // PyTorch without USDT notes.
    UprobeSpec{K::kTorchCore, kTorchReportSymbol, GF_API_TORCH_REPORT, P::kTorchReport, false, P::kTorchReport},
    // NCCL: entry sends the call with its stack (a call that never returns is
    // a hang, reported while stuck), return closes it.
    UprobeSpec{K::kNccl, "ncclAllReduce", GF_API_NCCL_ALL_REDUCE, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclBroadcast", GF_API_NCCL_BROADCAST, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclAllGather", GF_API_NCCL_ALL_GATHER, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclReduceScatter", GF_API_NCCL_REDUCE_SCATTER, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclSend", GF_API_NCCL_SEND, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclRecv", GF_API_NCCL_RECV, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclGroupStart", GF_API_NCCL_GROUP_START, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclGroupEnd", GF_API_NCCL_GROUP_END, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclCommInitRank", GF_API_NCCL_COMM_INIT_RANK, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclCommInitRankConfig", GF_API_NCCL_COMM_INIT_RANK_CONFIG, P::kNcclEnter, true,
               P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclCommDestroy", GF_API_NCCL_COMM_DESTROY, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclCommAbort", GF_API_NCCL_COMM_ABORT, P::kNcclEnter, true, P::kNcclExit},
    UprobeSpec{K::kNccl, "ncclGetUniqueId", GF_API_NCCL_GET_UNIQUE_ID, P::kNcclEnter, true, P::kNcclExit},
    // Interpreter shutdown barrier.
    UprobeSpec{K::kPython, "Py_FinalizeEx", GF_API_NONE, P::kPyFinalize, false, P::kPyFinalize},
};

#define GF_LAUNCH_ENTRY(name, cbid, kind) LaunchEntry{#name, cbid},
constexpr std::array kLaunchEntries = {GF_LAUNCH_ROUTE_ENTRIES(GF_LAUNCH_ENTRY)};
#undef GF_LAUNCH_ENTRY

}  // namespace

std::span<const UprobeSpec> UprobeSpecs() { return kSpecs; }
std::span<const LaunchEntry> LaunchEntries() { return kLaunchEntries; }

std::string_view ApiName(uint16_t api) {
  switch (api) {
    case GF_API_CUDA_MALLOC: return "cudaMalloc";
    case GF_API_CUDA_FREE: return "cudaFree";
    case GF_API_CUDA_MALLOC_ASYNC: return "cudaMallocAsync";
    case GF_API_CUDA_FREE_ASYNC: return "cudaFreeAsync";
    case GF_API_CUDA_MALLOC_MANAGED: return "cudaMallocManaged";
    case GF_API_CU_MEM_ALLOC: return "cuMemAlloc_v2";
    case GF_API_CU_MEM_FREE: return "cuMemFree_v2";
    case GF_API_CU_MEM_ALLOC_ASYNC: return "cuMemAllocAsync";
    case GF_API_CU_MEM_FREE_ASYNC: return "cuMemFreeAsync";
    case GF_API_CU_MEM_ALLOC_MANAGED: return "cuMemAllocManaged";
    case GF_API_CU_MEM_ALLOC_PITCH: return "cuMemAllocPitch_v2";
    case GF_API_CU_MEM_CREATE: return "cuMemCreate";
    case GF_API_CU_MEM_RELEASE: return "cuMemRelease";
    case GF_API_CU_MEM_MAP: return "cuMemMap";
    case GF_API_CU_MEM_UNMAP: return "cuMemUnmap";
    case GF_API_TORCH_MALLOC:
    case GF_API_TORCH_REPORT: return "c10::cuda::CUDACachingAllocator::malloc";
    case GF_API_TORCH_FREE: return "c10::cuda::CUDACachingAllocator::free";
    case GF_API_NCCL_ALL_REDUCE: return "ncclAllReduce";
    case GF_API_NCCL_BROADCAST: return "ncclBroadcast";
    case GF_API_NCCL_ALL_GATHER: return "ncclAllGather";
    case GF_API_NCCL_REDUCE_SCATTER: return "ncclReduceScatter";
    case GF_API_NCCL_SEND: return "ncclSend";
    case GF_API_NCCL_RECV: return "ncclRecv";
    case GF_API_NCCL_GROUP_START: return "ncclGroupStart";
    case GF_API_NCCL_GROUP_END: return "ncclGroupEnd";
    case GF_API_NCCL_COMM_INIT_RANK: return "ncclCommInitRank";
    case GF_API_NCCL_COMM_INIT_RANK_CONFIG: return "ncclCommInitRankConfig";
    case GF_API_NCCL_COMM_DESTROY: return "ncclCommDestroy";
    case GF_API_NCCL_COMM_ABORT: return "ncclCommAbort";
    case GF_API_NCCL_GET_UNIQUE_ID: return "ncclGetUniqueId";
    case GF_API_CUDA_STREAM_SYNC: return "cudaStreamSynchronize";
    case GF_API_CUDA_DEVICE_SYNC: return "cudaDeviceSynchronize";
    case GF_API_CUDA_EVENT_SYNC: return "cudaEventSynchronize";
    case GF_API_CU_STREAM_SYNC: return "cuStreamSynchronize";
    case GF_API_CU_CTX_SYNC: return "cuCtxSynchronize";
    case GF_API_CU_EVENT_SYNC: return "cuEventSynchronize";
    default: return "[unknown api]";
  }
}

}  // namespace gpuflame::profiler
