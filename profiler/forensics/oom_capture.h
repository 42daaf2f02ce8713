// What gpuflame keeps of one out-of-memory episode of one process: the
// request that failed first, how the episode ended, and the live set by
// stack at both levels as it was at that first failure. Self-contained: the
// stacks are copied as frame ids (FrameTable never forgets a frame), so a
// capture outlives its process and the retirement of its stacks.
#ifndef GPUFLAME_PROFILER_FORENSICS_OOM_CAPTURE_H_
#define GPUFLAME_PROFILER_FORENSICS_OOM_CAPTURE_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/process/k8s_metadata.h"
#include "profiler/process/service_hints.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

// How an episode ended.
enum class OomOutcome : uint8_t {
  // A later device allocation on the failing thread succeeded: PyTorch's
  // retry after freeing its cache (or the application's own).
  kRetrySucceeded,
  // PyTorch gave up: c10::reportOutOfMemoryToProfiler, then OutOfMemoryError.
  kRaised,
  // The process exited before either.
  kProcessExited,
  // Neither within OomEpisodes::kSettleNs (no PyTorch, or its report missed).
  kUnresolved,
};

// One stack of a live set.
struct OomHolder {
  std::vector<FrameId> frames;  // root first
  int64_t objects = 0;
  int64_t bytes = 0;
};

struct OomLiveSet {
  std::vector<OomHolder> holders;  // largest first
  int64_t objects = 0;
  int64_t bytes = 0;
  // Some of it stands for allocations sampled by bytes (the agent's default
  // for in-process tensor events): unbiased estimates, not exact bytes.
  bool estimated = false;
};

// The first device-level allocation call of the episode that returned out
// of memory (GF_EV_ALLOC_FAILED).
struct OomRequest {
  uint64_t ts_ns = 0;  // CLOCK_MONOTONIC
  uint32_t tid = 0;
  uint16_t api = 0;    // enum gf_api: the call the application made
  uint64_t bytes = 0;  // 0: not known (cuMemAllocPitch_v2)
  uint32_t error = 0;  // what the call returned
  std::vector<FrameId> frames;
};

// PyTorch's own report (GF_EV_OOM_REPORT), made just before it raises.
struct OomTorchReport {
  uint64_t ts_ns = 0;
  uint32_t tid = 0;
  uint64_t bytes = 0;      // the block it wanted (its rounded size)
  uint32_t device = 0;     // CUDA device index
  uint64_t allocated = 0;  // its totals then, after it freed its cache
  uint64_t reserved = 0;
  std::vector<FrameId> frames;
};

// The caching allocator's totals (summed over devices) at the first failure.
struct OomAllocatorTotals {
  uint64_t allocated = 0;
  uint64_t reserved = 0;
};

// What the driver says of the GPUs the process uses (NVML).
struct OomGpu {
  uint32_t index = 0;  // NVML's
  uint64_t total = 0;
  uint64_t free = 0;  // when read: once the failure's record is handled, maybe after PyTorch freed its cache
};
struct OomDeviceMemory {
  std::vector<OomGpu> gpus;  // empty: not known, and |unknown| says why
  std::string unknown;
};

// Who the process is, read when the episode opens (it may exit right after).
struct OomProcessContext {
  std::string process;  // comm
  PodInfo pod;
  ServiceHints service;
  // Whether it makes tensor-level events at all (PyTorch): if not, nothing
  // is waited for at that level.
  bool tensors_expected = false;
  OomDeviceMemory device;
};

struct OomCapture {
  pid_t pid = 0;
  uint32_t number = 0;  // 1 for the process's first out-of-memory episode
  int64_t wall_ns = 0;  // when the first failure happened, CLOCK_REALTIME
  OomProcessContext context;
  // The failing request: the first failed device call, or (none) PyTorch
  // refused without one (its per-process memory fraction, a missed call).
  std::optional<OomRequest> request;
  std::optional<OomTorchReport> torch;
  uint32_t failed_calls = 0;  // device calls of the episode that returned out of memory
  OomOutcome outcome = OomOutcome::kUnresolved;
  uint64_t outcome_ns = 0;            // when it was known (CLOCK_MONOTONIC), 0: never
  OomLiveSet device;                  // gpu_memory's live set at the first failure
  std::optional<OomLiveSet> tensors;  // torch_memory's, where PyTorch is observed
  std::optional<OomAllocatorTotals> totals;

  // The bytes of the failing request (the device call's, else PyTorch's).
  uint64_t requested_bytes() const { return request ? request->bytes : torch ? torch->bytes : 0; }
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_FORENSICS_OOM_CAPTURE_H_
