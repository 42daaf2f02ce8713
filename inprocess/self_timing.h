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

// A timed interval less the clock's own part.
inline uint64_t TimedPart(uint64_t interval_ns, uint64_t empty_ns) {
  return interval_ns > empty_ns ? interval_ns - empty_ns : 0;
}

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_SELF_TIMING_H_
