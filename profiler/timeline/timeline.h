// The timeline's collector: time-stamped events per process and thread,
// bounded, for `record --timeline` (exporters/trace writes them).
//
// What it keeps, each as the pipeline decoded it (nothing is re-read):
//  - CPU samples, merged per thread into spans of the frames they share
//    (stack_spans.h), and the same for the frames the user marked as phases
//    (--mark: only those frames, so a step and its parts nest);
//  - allocations and frees at both levels, each with its bytes, its stack
//    and its process's in use at that level after it (the counter tracks);
//  - sampled kernel launches (their stack and CUPTI correlation ID), and,
//    where the library sends them (record --timeline), every launch, copy
//    and memset call, entry to return, with its correlation ID and no
//    stack (the sampled launch of the same ID has it);
//  - GPU activity (kernels, copies, memsets) on CUPTI's clock, converted
//    when written through the library's clock snapshots (gpu_clock.h);
//  - CUDA synchronise calls and NCCL calls, exact spans from entry to
//    return (the probes' records), with their stacks; a call still in
//    flight when its thread or process ends or the recording stops ends
//    there, said unfinished;
//  - model-loading syscalls (openat, read, pread64, file mmap, GPU ioctl),
//    exact spans with their path or file name (interned: kMaxIoNames).
// Names are not copied: spans hold frame IDs and events stack IDs, named
// when written, after the last symbol refresh, exactly as the flame graphs
// name them. That holds while stack IDs are not reused, which only the
// agent's retirement of exited processes does: ForgetProcesses drops
// everything of theirs first (EventProcessor::RetireProcesses).
//
// Two ways to keep events. record's: all of them, in order, at most
// max_events; later ones are dropped and counted per type (the writer says
// so in the trace and record in summary.json and on the terminal). The
// agent's flight recorder: a FlightRing (flight_ring.h) of the last seconds
// per process, from which Snapshot copies what a trace asks for; an NCCL
// call is held aside until it returns, so that a call stuck for longer than
// the window is still in the trace of its hang. The writer bounds the bytes.
// Off unless record --timeline or the agent's flight recorder makes one:
// the pipeline then pays one null-pointer test per event.
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
#include "profiler/timeline/flight_ring.h"
#include "profiler/timeline/gpu_clock.h"
#include "profiler/timeline/phase_order.h"
#include "profiler/timeline/stack_spans.h"
#include "profiler/timeline/timeline_event.h"

namespace gpuflame::profiler::timeline {

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
  uint64_t phase_stacks_late = 0;               // exact calls' stacks older than their thread's last sample
  uint64_t samples_truncated = 0;               // deeper than StackSpans::kMaxDepth
  uint64_t samples_over_threads = 0;            // of new threads while StackSpans::kMaxThreads were active
  uint64_t samples_after_end = 0;               // of a thread already ended, from before its end (stack_spans.h)
  uint64_t gpu_weighted_records = 0;            // duty-cycled activity: stands for records not seen
  uint64_t io_names_over = 0;                   // I/O events past kMaxIoNames distinct names: named by ID only
  uint64_t api_calls_dropped_in_process = 0;    // CUDA API calls the library's buffer had no room for
};

class Timeline {
 public:
  static constexpr uint64_t kNotKept = UINT64_MAX;

  // |ring| (optional, outliving this): keep events there, not in events().
  Timeline(const StackTable& stacks, const FrameTable& frames, TimelineOptions options, FlightRing* ring = nullptr);

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
  // CUDA launch, copy and memset calls, entry to return, on CLOCK_MONOTONIC
  // (gf_api_record); |dropped_so_far|: the library's cumulative count of
  // calls it had no room for.
  void OnApiCalls(pid_t pid, std::span<const gf_api_record> records, uint64_t dropped_so_far);
  // A model-loading syscall (bpf/io_calls.bpf.h), entry to return: |call|
  // enum gf_io_call, |name| the path or file name the probe copied (the
  // process's bytes, any content; interned, at most kMaxIoNames distinct).
  void OnIo(pid_t pid, uint32_t tid, uint64_t start_ns, uint64_t end_ns, uint16_t call, uint64_t fd, int64_t bytes,
            int64_t result, uint64_t arg, std::string_view name, bool truncated);
  static constexpr uint32_t kMaxIoNames = 1 << 16;
  static constexpr uint32_t kNoIoName = UINT32_MAX;
  // The library's clock pair (gpu_clock.h); a library from before sends none.
  void OnClock(pid_t pid, uint64_t cupti_ns, uint64_t mono_before_ns, uint64_t mono_after_ns) {
    clock_.OnSnapshot(pid, cupti_ns, mono_before_ns, mono_after_ns);
  }
  // Ends the spans of |pid|'s threads (it exited at |ts_ns|).
  void OnProcessExit(pid_t pid, uint64_t ts_ns);
  // Ends every open span: call once, when the recording ends (|now_ns|,
  // CLOCK_MONOTONIC: where calls still in flight end).
  void Finish(uint64_t now_ns);

  // The flight recorder's trace (with a ring only): |pids|' events of host
  // time |since_ns| and later, and what is open at |now_ns| (each thread's
  // stack spans, its NCCL call in flight, said unfinished). Spans begun
  // before |since_ns| begin there. For the writer, with this timeline's names.
  std::deque<Event> Snapshot(std::span<const uint32_t> pids, uint64_t since_ns, uint64_t now_ns) const;
  // Retired processes: their events, names, clocks and calls, and the
  // stacks they used (|stacks|, about to be reused) are forgotten.
  void ForgetProcesses(std::span<const pid_t> pids, std::span<const StackId> stacks);
  const FlightRing* ring() const { return ring_; }

  const std::deque<Event>& events() const { return events_; }
  const StackTable& stacks() const { return stacks_; }
  const FrameTable& frames() const { return frames_; }
  const GpuClock& clock() const { return clock_; }
  const TimelineOptions& options() const { return options_; }
  // The demangled name |pid| announced for |name_id|, or null.
  const std::string* KernelName(pid_t pid, uint32_t name_id) const;
  // An I/O event's name (its ref), or null (kNoIoName, or unknown).
  const std::string* IoName(uint32_t id) const { return id < io_names_.size() ? &io_names_[id] : nullptr; }
  // The name of |pid|'s thread |tid| as first seen ("" if it could not be read).
  std::string ThreadName(pid_t pid, uint32_t tid) const;
  TimelineStats stats() const;

 private:
  // A stack's frames for the span mergers: all of them, and the marked ones.
  struct Sampled {
    std::vector<SampledFrame> all;
    std::vector<SampledFrame> marked;
    bool python = false;  // it has a Python frame (else it says nothing of the phases)
  };
  const Sampled& SampledStack(StackId stack);
  // A call's or allocation's stack at its exact time, for the phases: an
  // edge known to the call, not to the next sampling tick.
  void PhaseAt(pid_t pid, uint32_t tid, uint64_t ts_ns, StackId stack);
  // PhaseOrder's release: a phase input, in time order, to its merger.
  void ReleasePhase(uint64_t thread, uint64_t ts_ns, StackId stack, bool exact);
  uint32_t Identity(FrameId frame);
  // Where it is kept (events_' index or the ring's sequence number), or
  // kNotKept when over the bounds (counted).
  uint64_t Add(const Event& e);
  // |e|'s time on the host's clock, for the ring's window.
  uint64_t HostTime(const Event& e);
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
  PhaseOrder phase_order_;  // mark_spans_' inputs, back in time order
  absl::flat_hash_map<StackId, Sampled> sampled_;
  std::vector<uint32_t> identity_of_;                        // FrameId -> identity + 1 (0: not yet)
  absl::flat_hash_map<std::string, uint32_t> identities_;    // kind, name, file
  absl::flat_hash_map<uint64_t, std::string> kernel_names_;  // pid << 32 | name ID
  absl::flat_hash_map<uint64_t, std::string> thread_names_;  // pid << 32 | tid
  // I/O events' paths and file names, interned: a loader opens the same
  // few files again and again. A deque: IoName's pointers stay valid.
  std::deque<std::string> io_names_;
  absl::flat_hash_map<std::string, uint32_t> io_name_ids_;
  // NCCL calls in flight: thread key -> the event's index (stable: events_
  // only grows).
  absl::flat_hash_map<uint64_t, size_t> open_calls_;
  // With a ring: NCCL calls in flight, kept here until they end (a ring
  // index would not survive the call outlasting the window).
  absl::flat_hash_map<uint64_t, Event> pending_calls_;
  absl::flat_hash_map<pid_t, uint64_t> api_dropped_;  // the library's count, per process
  FlightRing* ring_ = nullptr;
  uint64_t latest_host_ns_ = 0;  // the newest host time seen: GPU records' time before a clock pair
};

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_TIMELINE_H_
