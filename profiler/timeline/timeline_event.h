// One event of the timeline: what the collector (timeline.h) keeps, the
// flight recorder's ring (flight_ring.h) holds, and the trace writer
// (exporters/trace) reads. Plain data, 72 bytes: a million are 70 MB.
#ifndef GPUFLAME_PROFILER_TIMELINE_TIMELINE_EVENT_H_
#define GPUFLAME_PROFILER_TIMELINE_TIMELINE_EVENT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gpuflame::profiler::timeline {

enum class EventType : uint8_t {
  kStackSpan = 0,  // a frame of a thread's sampled stack
  kMarkSpan,       // a marked frame (a phase) of a thread's sampled stack
  kMemory,         // an allocation or a free
  kLaunch,         // a sampled kernel launch
  kGpu,            // a kernel, copy or memset on a device's stream
  kCall,           // a CUDA synchronise or NCCL call, entry to return
  kIo,             // a model-loading syscall (openat, read, pread64, file mmap, GPU ioctl), entry to return
  kApi,            // a CUDA launch, copy or memset call, entry to return (the library's gf_api_record)
};
inline constexpr size_t kEventTypes = 8;
// "cpu_stack", "phase", "memory", "launch", "gpu", "call", "io", "api": summary.json's keys.
const char* EventTypeName(EventType type);
// {"cpu_stack": N, ...}: counts by type, for the trace's metadata and summary.json.
std::string EventCountsJson(const std::array<uint64_t, kEventTypes>& counts);

// kCall's flags.
inline constexpr uint8_t kCallUnfinished = 1;  // no return seen: ended with its process or the recording
// kIo's flags.
inline constexpr uint8_t kIoNameTruncated = 2;  // the process's path was longer than the probe copies

struct Event {
  uint64_t ts_ns = 0;   // CLOCK_MONOTONIC; kGpu: CUPTI's clock
  uint64_t end_ns = 0;  // spans, kGpu, kCall (same clock as ts_ns)
  int64_t bytes = 0;    // kMemory: + allocated, - freed (0: a free that matched nothing); kCall NCCL, kIo: bytes
  int64_t in_use = 0;   // kMemory: its process's in use at its level after it; kIo: the return value
  uint64_t addr = 0;    // kMemory: the address (or cuMemCreate handle); kGpu: the stream;
                        // kCall: the stream or event waited for, or the NCCL communicator; kIo: the fd;
                        // kApi: the call's return value
  uint32_t pid = 0;
  uint32_t tid = 0;          // kGpu: the device
  uint32_t ref = 0;          // spans: FrameId; kMemory, kLaunch, kCall: StackId; kGpu: kernel name ID;
                             // kIo: its name's ID (Timeline::IoName)
  uint32_t correlation = 0;  // kLaunch, kGpu, kApi: CUPTI's correlation ID; kCall: the call's return value;
                             // kIo: the low half of gf_event.arg1 (flags, offset, request)
  uint32_t graph = 0;        // kGpu: the CUDA graph it ran in (0: none); kIo: arg1's high half
  int32_t peer = -1;         // kCall NCCL: the peer, root or rank it names (-1: none)
  uint16_t depth = 0;        // spans: 0 is the root; kCall: NCCL 0, synchronise 1 (inside NCCL's)
  uint16_t api = 0;          // kMemory, kCall: enum gf_api; kLaunch, kApi: CUPTI's callback ID; kIo: enum gf_io_call
  EventType type = EventType::kStackSpan;
  uint8_t kind = 0;       // kMemory, kCall: enum gf_domain; kGpu: enum gf_gpu_activity_kind;
                          // kApi: CUpti_CallbackDomain (1 driver, 2 runtime)
  uint8_t copy_kind = 0;  // kGpu memcpy: CUpti_ActivityMemcpyKind; kCall NCCL: ncclDataType_t
  uint8_t flags = 0;      // kCall: kCallUnfinished; kIo: kIoNameTruncated
};

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_TIMELINE_EVENT_H_
