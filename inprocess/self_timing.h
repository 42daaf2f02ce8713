// How the injection library times itself inside the workload (the tensor
// hook, the CUPTI callbacks): one call in kTimedOneIn between two clock
// reads, scaled. A timed interval also holds part of the two reads
// themselves, which the untimed calls never pay: MeasureEmptyIntervalNs()
// measures that part, taken off each timed interval (TimedPart); the timed
// calls' own reads are then counted once, as what they are (two reads each).
#ifndef GPUFLAME_INPROCESS_SELF_TIMING_H_
#define GPUFLAME_INPROCESS_SELF_TIMING_H_

#include <time.h>

#include <algorithm>
#include <cstdint>

namespace gpuflame::inprocess {

inline constexpr uint64_t kTimedOneIn = 64;

inline uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// What two back-to-back reads measure with nothing between them: the least
// of a few tries (tens of ns where the clock is the TSC's; more where it is
// not), at most 10 µs. Measured once per caller, at start.
inline uint64_t MeasureEmptyIntervalNs() {
  uint64_t least = 10'000;
  for (int i = 0; i < 16; i++) {
    const uint64_t a = MonotonicNs();
    least = std::min(least, MonotonicNs() - a);
  }
  return least;
}

// Whether the call with this |id| is one of the timed ones, where calls
// carry an ID that counts up (CUPTI's correlation IDs): no counter to keep,
// so no per-thread state on a path where a dlopen'ed library's thread_local
// costs more than the rest. A multiplicative hash's top bits pick one in
// kTimedOneIn of any arithmetic progression of IDs, where |id % 64| would
// pick one kind of call only when calls take IDs in a fixed pattern (a
// runtime launch and the driver launch inside it take two in a row). ID 0
// is always timed: were a source to give no IDs, its cost would read high,
// never hide.
inline bool TimedById(uint64_t id) {
  static_assert(kTimedOneIn == 64, "the hash keeps the top 6 bits");
  return ((id * 0x9e3779b97f4a7c15ull) >> 58) == 0;
}

// A timed interval less the clock's own part.
inline uint64_t TimedPart(uint64_t interval_ns, uint64_t empty_ns) {
  return interval_ns > empty_ns ? interval_ns - empty_ns : 0;
}

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_SELF_TIMING_H_
