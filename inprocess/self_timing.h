// How the injection library times itself inside the workload (the tensor
// hook, the CUPTI callbacks): one call in kTimedOneIn between two reads of
// the CPU's cycle counter (Ticks), scaled. A timed interval also holds part
// of the two reads themselves, which the untimed calls never pay:
// MeasureEmptyIntervalTicks() measures that part, taken off each timed
// interval (TimedPart); the timed calls' own reads are then counted once,
// as what they are (two reads each). TickRate turns ticks into ns.
//
// Why the cycle counter and not CLOCK_MONOTONIC: a clock read goes through
// the PLT, the vDSO's code and its data page, lines the step's own work
// evicts between our calls, and their misses fell inside the timed interval
// as if they were ours. On an H100 host's launch-bound step a closed CUPTI
// callback, one line of code and one of data, read 108 ns that way
// (session 33). rdtscp is one instruction that touches no memory, and waits
// for the instructions before it (a plain rdtsc may run ahead of a load
// still missing, and under-count it).
#ifndef GPUFLAME_INPROCESS_SELF_TIMING_H_
#define GPUFLAME_INPROCESS_SELF_TIMING_H_

#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include <algorithm>
#include <cstdint>

namespace gpuflame::inprocess {

inline constexpr uint64_t kTimedOneIn = 64;

inline uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// What two back-to-back clock reads measure with nothing between them:
// the least of a few tries (tens of ns where the clock is the TSC's; more
// where it is not), at most 10 µs. Measured once per caller, at start. For
// intervals timed by the clock: a taken allocation's walk, µs long.
inline uint64_t MeasureEmptyIntervalNs() {
  uint64_t least = 10'000;
  for (int i = 0; i < 16; i++) {
    const uint64_t a = MonotonicNs();
    least = std::min(least, MonotonicNs() - a);
  }
  return least;
}

#if defined(__x86_64__)
// Whether the CPU has rdtscp (CPUID 0x80000001, EDX bit 27): a hypervisor
// may hide it, and it would then fault. Read once, when the library loads.
inline bool HasRdtscp() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}
inline const bool kHasRdtscp = HasRdtscp();
#endif

// The cycle counter (the file's comment), with no call, so that a caller
// needs no stack frame for it: rdtscp, or where a hypervisor hides it,
// rdtsc after lfence (which also waits for the instructions before it).
// Elsewhere than x86-64, the clock (a tick is then a ns).
#if defined(__x86_64__)
inline uint64_t Ticks() {
  if (__builtin_expect(kHasRdtscp, 1)) {
    unsigned aux;
    return __rdtscp(&aux);
  }
  _mm_lfence();
  return __rdtsc();
}
#else
inline uint64_t Ticks() { return MonotonicNs(); }
#endif

// MeasureEmptyIntervalNs's counterpart in ticks.
inline uint64_t MeasureEmptyIntervalTicks() {
  uint64_t least = ~uint64_t{0};
  for (int i = 0; i < 16; i++) {
    const uint64_t a = Ticks();
    least = std::min(least, Ticks() - a);
  }
  return least;
}

// Ticks to ns: the counter's rate against CLOCK_MONOTONIC since Start (the
// library's), so that no start-up calibration delays the workload. Start
// once, before any reader; NsPerTick on the thread that reports.
class TickRate {
 public:
  void Start() {
    mono0_ = MonotonicNs();
    tick0_ = Ticks();
  }
  // 0 until a ms has passed since Start: too short to tell.
  double NsPerTick() const {
    const uint64_t mono = MonotonicNs(), ticks = Ticks();
    if (mono < mono0_ + 1'000'000 || ticks <= tick0_) return 0;
    return static_cast<double>(mono - mono0_) / static_cast<double>(ticks - tick0_);
  }

 private:
  uint64_t mono0_ = 0, tick0_ = 0;
};

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

// A timed interval less the clock's own part. An interval that reads
// negative (a counter that went back: a thread moved between CPUs whose
// counters a hypervisor did not keep together) counts as nothing, not as
// 2^64 ticks.
inline uint64_t TimedPart(uint64_t interval, uint64_t empty) {
  if (static_cast<int64_t>(interval) < 0) return 0;
  return interval > empty ? interval - empty : 0;
}

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_SELF_TIMING_H_
