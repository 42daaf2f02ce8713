// Sampled stacks over time to spans, per thread, as sampling profilers'
// flame charts draw them: consecutive samples of one thread that share a
// prefix of frames keep those frames' spans open; a frame not in the next
// sample ends where that sample is. Frames are compared by identity (a
// function, not a line: a Python frame moving from line to line in one call
// stays one span), given by the caller as small integers.
//
// What sampling can and cannot say: a span starts at the first sample that
// shows its frame and ends at the first that does not, so each edge is late
// by up to one sampling period (less where exact events with stacks, fed as
// samples through OnExactStack, fall near it); two calls of the same function with no
// sample outside them in between read as one span. A thread with no sample
// for more than kGapPeriods periods was off CPU (a cpu-clock sampler only
// sees threads that run): its open spans end one period after its last
// sample, rather than stretching over the time it slept.
// Not thread-safe: event loop only (the timeline's collector calls it).
#ifndef GPUFLAME_PROFILER_TIMELINE_STACK_SPANS_H_
#define GPUFLAME_PROFILER_TIMELINE_STACK_SPANS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gpuflame::profiler::timeline {

// One frame of a sample: |identity| decides merging, |frame| names the span.
struct SampledFrame {
  uint32_t identity = 0;
  uint32_t frame = 0;
  bool operator==(const SampledFrame&) const = default;
};

// A closed span: [start_ns, end_ns) at |depth| (0: the root) on |thread|.
struct StackSpan {
  uint64_t thread = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t frame = 0;
  uint16_t depth = 0;
};

class StackSpans {
 public:
  static constexpr uint64_t kGapPeriods = 4;
  // Deeper frames than this are cut (and counted): spans nest by depth.
  static constexpr size_t kMaxDepth = 512;
  // Threads with state kept at once. At the cap, threads idle for a gap are
  // ended (their spans would end so at their next sample anyway); samples of
  // a new thread while all are active are left out, counted.
  static constexpr size_t kMaxThreads = 1 << 16;
  // How long an ended thread's end is remembered: records cross in the ring
  // by what one reader pass holds (milliseconds); a second is ample.
  static constexpr uint64_t kEndedKeptNs = 1'000'000'000;

  // |emit| gets each span as it closes (innermost first at one instant).
  StackSpans(uint64_t period_ns, std::function<void(const StackSpan&)> emit)
      : period_ns_(period_ns ? period_ns : 1), emit_(std::move(emit)) {}

  // |thread| (any key: pid << 32 | tid) was seen in |frames| (root first) at
  // |ts_ns|. An empty |frames| closes what was open, as a gap would.
  void OnSample(uint64_t thread, uint64_t ts_ns, std::span<const SampledFrame> frames);
  // |thread| was in |frames| at |ts_ns|, by an exact event (a launch, a
  // synchronise or NCCL call with its stack): a sample as good as any, but
  // only in order. One older than the thread's last sample is left out
  // (counted), where OnSample would move it to the later time: a stack
  // moved in time would open or end spans where the thread was not.
  void OnExactStack(uint64_t thread, uint64_t ts_ns, std::span<const SampledFrame> frames);
  // Closes |thread|'s spans one period after its last sample (it exited).
  // A sample of it that comes later but is older than that end (a CPU's
  // record of the thread's last instants, crossed in the ring with the exit
  // event) is left out, counted: it would open spans over the ones just
  // ended. Its ends are kept for kEndedKeptNs after the newest sample.
  void EndThread(uint64_t thread);
  // Closes every thread's spans (the recording ends).
  void EndAll();
  // The spans open now, as EndAll would close them (one period after their
  // thread's last sample, and not after |now_ns|), without closing them:
  // the flight recorder's snapshot of a thread still running.
  void ForEachOpen(uint64_t now_ns, const std::function<void(const StackSpan&)>& visit) const;

  uint64_t reordered() const { return reordered_; }        // samples older than their thread's last: taken at it
  uint64_t exact_late() const { return exact_late_; }      // exact stacks older than their thread's last: left out
  uint64_t truncated() const { return truncated_; }        // samples deeper than kMaxDepth
  uint64_t over_threads() const { return over_threads_; }  // samples of new threads past kMaxThreads
  uint64_t after_end() const { return after_end_; }        // samples older than their ended thread's end
  size_t open_threads() const { return threads_.size(); }

 private:
  struct Open {
    SampledFrame frame;
    uint64_t start_ns;
  };
  struct Thread {
    std::vector<Open> open;  // root first
    uint64_t last_ns = 0;
  };
  // Ends |t|'s frames from |keep| on at |end_ns|, innermost first.
  void Close(uint64_t thread, Thread& t, size_t keep, uint64_t end_ns);
  // Whether a sample of |thread| at |ts_ns| comes from before its end.
  bool EndedAfter(uint64_t thread, uint64_t ts_ns);

  uint64_t period_ns_;
  std::function<void(const StackSpan&)> emit_;
  absl::flat_hash_map<uint64_t, Thread> threads_;
  absl::flat_hash_map<uint64_t, uint64_t> ended_;  // thread -> where its spans ended
  uint64_t newest_ns_ = 0;
  uint64_t reordered_ = 0;
  uint64_t exact_late_ = 0;
  uint64_t truncated_ = 0;
  uint64_t over_threads_ = 0;
  uint64_t after_end_ = 0;
};

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_STACK_SPANS_H_
