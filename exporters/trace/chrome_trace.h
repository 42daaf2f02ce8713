// The timeline (profiler/timeline) as a Chrome Trace Event JSON document:
// what ui.perfetto.dev, chrome://tracing and speedscope open (gzipped by
// the caller: all three read .json.gz).
//
// Why this format and not Perfetto's protobuf: three viewers open it, one
// of them (speedscope, from npm) runs in a browser in our tests as a reader
// we did not write, and it needs no schema carried along. What it costs:
// GPU streams and phase tracks are threads of their process with made-up
// thread IDs (above any real one, named "GPU 0 stream 7", "phases: python");
// flows bind to slices (flow v2, bind_id on X events), so a launch is an
// X slice of no duration; counters carry no unit (the series is "bytes").
//
// Layout, per process (pid): its threads (the merged CPU stacks, the
// launches as zero-length slices, allocations and frees as instants with
// their bytes and stack), a phase track per thread with --mark, a call
// track per thread with CUDA synchronise and NCCL calls and an I/O track with model-loading
// syscalls (whole X slices:
// their edges are exact), one track per GPU stream (kernels, copies,
// memsets with their correlation IDs), and
// two counters (in use at the device level, through CUDA's allocation
// calls, and at the tensor level, PyTorch's caching allocator); and each
// GPU's busy fraction from its kernels, under a process of its own (pid 0). Flow arrows
// go from each sampled launch to the GPU work with its correlation ID
// (a graph's kernels in a chain). Times are microseconds from the earliest
// event, three decimals (nanoseconds); the metadata says which instant on
// CLOCK_MONOTONIC that is, how the GPU's clock was aligned, and what the
// limits dropped.
#ifndef GPUFLAME_EXPORTERS_TRACE_CHROME_TRACE_H_
#define GPUFLAME_EXPORTERS_TRACE_CHROME_TRACE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "profiler/timeline/timeline.h"

namespace gpuflame::exporters {

struct ChromeTraceOptions {
  // The JSON's size: events past it (the latest) are left out, counted.
  uint64_t max_bytes = uint64_t{256} << 20;
  std::string title;
  absl::flat_hash_map<uint32_t, std::string> process_names;  // pid -> name
  // The agent's flight recorder: a snapshot to write instead of the
  // timeline's own events (Timeline::Snapshot; the timeline still names them).
  const std::deque<profiler::timeline::Event>* events = nullptr;
  // Members added to the metadata object as they are ("\"flight_recorder\":{...}").
  std::string metadata;
  // Events the caller knows are missing (the flight recorder's evictions):
  // in the note on the trace itself, with those the limits left out.
  uint64_t missing = 0;
};

struct ChromeTraceStats {
  uint64_t events = 0;  // trace events written, metadata events included
  std::array<uint64_t, profiler::timeline::kEventTypes> dropped_for_bytes{};
  uint64_t gpu_uncalibrated = 0;    // GPU records of a process that sent no clock snapshot: left out
  uint64_t flows = 0;               // launches with an arrow to their GPU work
  uint64_t gpu_without_launch = 0;  // GPU records whose launch call was neither sent nor sampled: no arrow
  uint64_t memory_calls_joined = 0;  // device allocations and frees drawn as their calls' spans
  uint64_t gpu_overlapping = 0;      // GPU work begun before earlier work on its stream ended: on a track below it
  uint64_t gpu_overlap_beyond_lanes = 0;  // ... of which past the tracks a stream may take: on its last (mis-nested)
  uint64_t json_bytes = 0;
  uint64_t dropped_for_bytes_total() const {
    uint64_t n = 0;
    for (uint64_t d : dropped_for_bytes) n += d;
    return n;
  }
};

// The document. |stats| (required) says what went in and what did not.
std::string ChromeTraceJson(const profiler::timeline::Timeline& timeline, const ChromeTraceOptions& options,
                            ChromeTraceStats* stats);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_TRACE_CHROME_TRACE_H_
