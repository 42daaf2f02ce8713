// The agent's flight recorder: the timeline's events (timeline.h) of the
// last few seconds, per process, in bounded memory, so that a trace of what
// led up to a moment (a request, an out-of-memory, a stuck NCCL call) can be
// written after it.
//
// Why a ring of its own and not Timeline's deque: record keeps a whole
// recording and stops at max_events; the agent runs for months, so old
// events must go as new ones come, per process, without a process that
// floods (thousands of kernels a second) pushing out the others' seconds.
//
// Each process has a circular buffer that grows by doubling up to its cap
// and is then reused in place: appending costs no allocation in the steady
// state. An event leaves it when
//  - it is older than the window, by its host time (|age_ns|: its end on
//    CLOCK_MONOTONIC) against the newest its process has sent ("aged out",
//    the ring's purpose, counted apart); events arrive nearly in time order
//    per process (spans when they close, GPU records a buffer flush late),
//    so the check at the front is the check of all but a few stragglers,
//    which the snapshot's time filter leaves out;
//  - its process's buffer is at max_process_events ("evicted", oldest first);
//  - the buffers of all processes hold max_total_events: a buffer that
//    cannot grow evicts its own oldest; one below half the largest takes
//    room from it (the largest is halved, its oldest evicted), so a new
//    process is never starved by an old one.
// Evicted events are the bounds cutting into the window: the trace of that
// process says how many, and covers less than was asked (it says from when).
// Memory is bounded by capacity, not size: max_total_events slots of
// kSlotBytes at most, plus one small header per process.
// Not thread-safe: event loop only (Timeline calls it).
#ifndef GPUFLAME_PROFILER_TIMELINE_FLIGHT_RING_H_
#define GPUFLAME_PROFILER_TIMELINE_FLIGHT_RING_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/timeline/timeline_event.h"

namespace gpuflame::profiler::timeline {

struct FlightRingOptions {
  uint64_t window_ns = 5'000'000'000;
  uint64_t max_process_events = 200'000;
  uint64_t max_total_events = 800'000;
};

// Counts since the start, forgotten processes included.
struct FlightRingStats {
  uint64_t pushed = 0;
  uint64_t aged_out = 0;  // older than the window: the ring's purpose
  uint64_t evicted = 0;   // pushed out by a bound before they were old: lost to traces
  uint64_t events = 0;    // held now
  uint64_t capacity = 0;  // slots allocated now (bytes: capacity * kSlotBytes)
  uint64_t processes = 0;
};

// One process's part, for its trace.
struct FlightProcessStats {
  uint64_t events = 0;
  uint64_t aged_out = 0;
  uint64_t evicted = 0;
  uint64_t oldest_ns = 0;  // host time of the oldest event held (0: none)
};

class FlightRing {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;

  explicit FlightRing(FlightRingOptions options);

  // Appends |e| (its process: e.pid) as of host time |age_ns|; returns its
  // sequence number in its process, for At() until it leaves.
  uint64_t Push(const Event& e, uint64_t age_ns);
  // The event |seq| of |pid|, or null once it has left.
  Event* At(uint32_t pid, uint64_t seq);
  // Appends |pid|'s events whose host time is at or after |since_ns|, oldest
  // first (in the order they came).
  void CopySince(uint32_t pid, uint64_t since_ns, std::deque<Event>& out) const;
  // Drops |pid|'s events and buffer (it was retired: its stack IDs are
  // about to mean another process's).
  void Forget(uint32_t pid);

  FlightProcessStats ProcessStats(uint32_t pid) const;
  // |pid|'s events evicted (or dropped) whose host time's second is that of
  // |since_ns| or later: what a trace from |since_ns| lacks, to the second,
  // for windows up to kEvictionSeconds.
  uint64_t EvictedSince(uint32_t pid, uint64_t since_ns) const;
  static constexpr size_t kEvictionSeconds = 64;
  FlightRingStats stats() const;
  const FlightRingOptions& options() const { return options_; }

  struct Slot {
    Event event;
    uint64_t age_ns;
  };
  static constexpr uint64_t kSlotBytes = sizeof(Slot);

 private:
  struct Ring {
    std::vector<Slot> slots;  // circular; size() is the capacity
    size_t head = 0;          // the oldest
    size_t size = 0;
    uint64_t first_seq = 0;  // the oldest's sequence number
    uint64_t newest_ns = 0;  // the newest host time pushed
    uint64_t aged_out = 0;
    uint64_t evicted = 0;
    // Evictions by the second of their host time (second % kEvictionSeconds).
    std::array<uint64_t, kEvictionSeconds> evicted_second{};
    std::array<uint64_t, kEvictionSeconds> evicted_count{};
  };
  void CountEviction(Ring& r, uint64_t age_ns);
  Ring& RingOf(uint32_t pid);
  void PopFront(Ring& r);
  // Reallocates |r| to |capacity| slots (>= its size), oldest at 0.
  void Resize(Ring& r, size_t capacity);
  // Room for one more in |r|, within the bounds.
  void MakeRoom(Ring& r);
  Ring* Largest();

  FlightRingOptions options_;
  // unique_ptr: the cached pointer below survives rehashing.
  absl::flat_hash_map<uint32_t, std::unique_ptr<Ring>> rings_;
  uint32_t last_pid_ = 0;  // events come in runs from one process
  Ring* last_ring_ = nullptr;
  uint64_t events_ = 0;
  uint64_t capacity_ = 0;
  FlightRingStats totals_;  // pushed, aged_out, evicted
};

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_FLIGHT_RING_H_
