// The timeline's collector: time-stamped events per process and thread,
// bounded, for `record --timeline` (exporters/trace writes them).
//
// What it keeps, each as the pipeline decoded it (nothing is re-read):
//  - CPU samples, merged per thread into spans of the frames they share
//    (stack_spans.h), and the same for the frames the user marked as phases
//    (--mark: only those frames, so a step and its parts nest);
//  - allocations and frees at both levels, each with its bytes, its stack
//    and its process's in use at that level after it (the counter tracks);
//  - sampled kernel launches (their stack and CUPTI correlation ID);
//  - GPU activity (kernels, copies, memsets) on CUPTI's clock, converted
//    when written through the library's clock snapshots (gpu_clock.h);
//  - CUDA synchronise calls and NCCL calls, exact spans from entry to
//    return (the probes' records), with their stacks; a call still in
//    flight when its thread or process ends or the recording stops ends
//    there, said unfinished.
// Names are not copied: spans hold frame IDs and events stack IDs, named
// when written, after the last symbol refresh, exactly as the flame graphs
// name them. That holds while stack IDs are not reused, which only the
// agent's retirement of exited processes does: the agent does not collect
// a timeline.
//
// Bounded: at most max_events events are kept; later ones are dropped and
// counted per type (the writer says so in the trace and record in
// summary.json and on the terminal). The writer bounds the bytes.
// Off unless record --timeline makes one: the pipeline then pays one
// null-pointer test per event.
// Not thread-safe: event loop only (EventProcessor calls it).
#ifndef GPUFLAME_PROFILER_TIMELINE_TIMELINE_H_
#define GPUFLAME_PROFILER_TIMELINE_TIMELINE_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/resolve/stack_table.h"
#include "profiler/timeline/gpu_clock.h"
#include "profiler/timeline/stack_spans.h"

namespace gpuflame::profiler::timeline {

enum class EventType : uint8_t {
  kStackSpan = 0,  // a frame of a thread's sampled stack
  kMarkSpan,       // a marked frame (a phase) of a thread's sampled stack
  kMemory,         // an allocation or a free
  kLaunch,         // a sampled kernel launch
  kGpu,            // a kernel, copy or memset on a device's stream
  kCall,           // a CUDA synchronise or NCCL call, entry to return
};
inline constexpr size_t kEventTypes = 6;
// "cpu_stack", "phase", "memory", "launch", "gpu", "call": summary.json's keys.
const char* EventTypeName(EventType type);
// {"cpu_stack": N, ...}: counts by type, for the trace's metadata and summary.json.
std::string EventCountsJson(const std::array<uint64_t, kEventTypes>& counts);

// kCall's flags.
inline constexpr uint8_t kCallUnfinished = 1;  // no return seen: ended with its process or the recording

struct Event {
  uint64_t ts_ns = 0;   // CLOCK_MONOTONIC; kGpu: CUPTI's clock
  uint64_t end_ns = 0;  // spans, kGpu, kCall (same clock as ts_ns)
  int64_t bytes = 0;    // kMemory: + allocated, - freed (0: a free that matched nothing); kCall NCCL: bytes
  int64_t in_use = 0;   // kMemory: its process's in use at its level after it
  uint64_t addr = 0;    // kMemory: the address (or cuMemCreate handle); kGpu: the stream;
                        // kCall: the stream or event waited for, or the NCCL communicator
  uint32_t pid = 0;
  uint32_t tid = 0;          // kGpu: the device
  uint32_t ref = 0;          // spans: FrameId; kMemory, kLaunch, kCall: StackId; kGpu: kernel name ID
  uint32_t correlation = 0;  // kLaunch, kGpu: CUPTI's correlation ID; kCall: the call's return value
  uint32_t graph = 0;        // kGpu: the CUDA graph it ran in (0: none)
  int32_t peer = -1;         // kCall NCCL: the peer, root or rank it names (-1: none)
  uint16_t depth = 0;        // spans: 0 is the root; kCall: NCCL 0, synchronise 1 (inside NCCL's)
  uint16_t api = 0;          // kMemory, kCall: enum gf_api; kLaunch: CUPTI's callback ID
  EventType type = EventType::kStackSpan;
  uint8_t kind = 0;       // kMemory, kCall: enum gf_domain; kGpu: enum gf_gpu_activity_kind
  uint8_t copy_kind = 0;  // kGpu memcpy: CUpti_ActivityMemcpyKind; kCall NCCL: ncclDataType_t
  uint8_t flags = 0;      // kCall: kCallUnfinished
};

struct TimelineOptions {
  uint64_t max_events = 1'000'000;
  uint64_t sample_period_ns = 1'000'000'000 / 97;
  // Frame names (as the flame graphs show them, "Trainer > step") whose
  // spans are phases, on a track of their own per thread.
  std::vector<std::string> marks;
};

struct TimelineStats {
  std::array<uint64_t, kEventTypes> kept{};
  std::array<uint64_t, kEventTypes> dropped{};  // over max_events
  uint64_t samples_reordered = 0;               // a thread's sample older than its last (stack_spans.h)
  uint64_t samples_truncated = 0;               // deeper than StackSpans::kMaxDepth
  uint64_t samples_over_threads = 0;            // of new threads while StackSpans::kMaxThreads were active
  uint64_t gpu_weighted_records = 0;            // duty-cycled activity: stands for records not seen
};

class Timeline {
 public:
  Timeline(const StackTable& stacks, const FrameTable& frames, TimelineOptions options);

  void OnCpuSample(pid_t pid, uint32_t tid, uint64_t ts_ns, StackId stack);
  void OnMemory(pid_t pid, uint32_t tid, uint64_t ts_ns, uint8_t domain, uint16_t api, uint64_t addr, int64_t bytes,
                StackId stack, int64_t in_use);
  void OnLaunch(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t correlation, uint32_t cbid, StackId stack);
  void OnGpuRecords(pid_t pid, std::span<const gf_kernel_record> records);
  // A CUDA synchronise call, whose one record has its entry and its return.
  void OnSyncCall(pid_t pid, uint32_t tid, uint64_t start_ns, uint64_t end_ns, uint16_t api, uint64_t object,
                  StackId stack, uint32_t result);
  // An NCCL call's entry (|peer|: peer, root or rank; -1 none) and, on the
  // same thread, its return (the probes record only the outermost call).
  void OnNcclCall(pid_t pid, uint32_t tid, uint64_t ts_ns, uint16_t api, uint64_t comm, int64_t bytes, int32_t peer,
                  uint32_t datatype, StackId stack);
  void OnNcclReturn(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t result);
  // The thread ended inside its NCCL call (its process lives on): the call
  // ends there, unfinished.
  void OnThreadEnded(pid_t pid, uint32_t tid, uint64_t ts_ns);
  void OnKernelName(pid_t pid, uint32_t name_id, std::string_view mangled);
  // The library's clock pair (gpu_clock.h); a library from before sends none.
  void OnClock(pid_t pid, uint64_t cupti_ns, uint64_t mono_before_ns, uint64_t mono_after_ns) {
    clock_.OnSnapshot(pid, cupti_ns, mono_before_ns, mono_after_ns);
  }
  // Ends the spans of |pid|'s threads (it exited at |ts_ns|).
  void OnProcessExit(pid_t pid, uint64_t ts_ns);
  // Ends every open span: call once, when the recording ends (|now_ns|,
  // CLOCK_MONOTONIC: where calls still in flight end).
  void Finish(uint64_t now_ns);

  const std::deque<Event>& events() const { return events_; }
  const StackTable& stacks() const { return stacks_; }
  const FrameTable& frames() const { return frames_; }
  const GpuClock& clock() const { return clock_; }
  const TimelineOptions& options() const { return options_; }
  // The demangled name |pid| announced for |name_id|, or null.
  const std::string* KernelName(pid_t pid, uint32_t name_id) const;
  // The name of |pid|'s thread |tid| as first seen ("" if it could not be read).
  std::string ThreadName(pid_t pid, uint32_t tid) const;
  TimelineStats stats() const;

 private:
  // A stack's frames for the span mergers: all of them, and the marked ones.
  struct Sampled {
    std::vector<SampledFrame> all;
    std::vector<SampledFrame> marked;
  };
  const Sampled& SampledStack(StackId stack);
  uint32_t Identity(FrameId frame);
  // False when over max_events (counted).
  bool Add(const Event& e);
  // Ends |it|'s call, unfinished, at |ts_ns|.
  void EndUnfinished(size_t index, uint64_t ts_ns);
  // Closed spans of a merger, as events of |type|.
  std::function<void(const StackSpan&)> SpanSink(EventType type);
  void SeeThread(pid_t pid, uint32_t tid);
  static uint64_t ThreadKey(pid_t pid, uint32_t tid) { return uint64_t{static_cast<uint32_t>(pid)} << 32 | tid; }

  const StackTable& stacks_;
  const FrameTable& frames_;
  TimelineOptions options_;
  // A deque: growing it copies nothing (a million events are 70 MB).
  std::deque<Event> events_;
  uint64_t last_thread_ = 0;  // SeeThread's last key: events come in runs from one thread
  TimelineStats stats_;
  GpuClock clock_;
  StackSpans stack_spans_;
  StackSpans mark_spans_;
  absl::flat_hash_map<StackId, Sampled> sampled_;
  std::vector<uint32_t> identity_of_;                        // FrameId -> identity + 1 (0: not yet)
  absl::flat_hash_map<std::string, uint32_t> identities_;    // kind, name, file
  absl::flat_hash_map<uint64_t, std::string> kernel_names_;  // pid << 32 | name ID
  absl::flat_hash_map<uint64_t, std::string> thread_names_;  // pid << 32 | tid
  // NCCL calls in flight: thread key -> the event's index (stable: events_
  // only grows).
  absl::flat_hash_map<uint64_t, size_t> open_calls_;
};

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_TIMELINE_H_
