// Small helpers every part of the injection library shares: the clock, the
// flusher thread's identity, numbers from the environment, and the
// GPUFLAME_CUPTI_DEBUG trace.
#ifndef GPUFLAME_CUPTI_LIBRARY_UTIL_H_
#define GPUFLAME_CUPTI_LIBRARY_UTIL_H_

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "inprocess/self_timing.h"

namespace gpuflame::cupti {

// The flusher's tick (injection.cc): duty cycles and tensor events move on it.
inline constexpr int kTickMs = 100;

// Set by the flusher thread for itself: work done on it is counted by its
// own CPU time, not timed again.
inline thread_local bool on_flusher = false;

// CLOCK_MONOTONIC (the BPF clock), as the in-process code reads it.
inline uint64_t NowNs() { return inprocess::MonotonicNs(); }

// The calling thread's CPU time so far.
inline uint64_t ThreadCpuNs() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline bool Tracing() {
  static const bool on = std::getenv("GPUFLAME_CUPTI_DEBUG") != nullptr;
  return on;
}
inline void Trace(const char* what) {
  if (Tracing()) std::fprintf(stderr, "gpuflame_cupti: %s\n", what);
}

// To the workload's stderr: what the user must know (kernel time off).
inline void Say(const char* what) { std::fprintf(stderr, "gpuflame: %s\n", what); }

// A non-negative number from the environment, else |fallback|.
inline double EnvNumber(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  return end && *end == '\0' && d >= 0 ? d : fallback;
}

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_LIBRARY_UTIL_H_
