// Adds that stop at the bounds instead of overflowing. Counts and bytes come
// from profiled processes (a tensor batch is the process's own bytes): an
// absurd one must saturate a counter, and a sum of saturated counters must
// not wrap (both found by the record fuzzer). No real figure comes near.
#ifndef GPUFLAME_BASE_SATURATING_H_
#define GPUFLAME_BASE_SATURATING_H_

#include <cstdint>

namespace gpuflame::base {

inline void SaturatingAdd(int64_t& to, int64_t v) {
  if (__builtin_add_overflow(to, v, &to)) to = v > 0 ? INT64_MAX : INT64_MIN;
}

// a - b, at the bounds where it would overflow (a diff of two profiles'
// values, which may be saturated sums themselves).
inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_sub_overflow(a, b, &out)) return b < 0 ? INT64_MAX : INT64_MIN;
  return out;
}

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_SATURATING_H_
