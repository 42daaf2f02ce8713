// Keeps a profile inside what Pyroscope accepts by default (its validation
// limits: 4 MiB uncompressed profile, 16000 samples, 1000 frames per stack
// (truncated leaf-side), 65535-byte strings, 30 labels per series, label
// names 1024 and values 2048 bytes) without losing
// bytes: the least significant stacks are folded into one `[other]` sample,
// so every total stays exact, and each fold is reported.
#ifndef GPUFLAME_EXPORTERS_PPROF_PROFILE_LIMITS_H_
#define GPUFLAME_EXPORTERS_PPROF_PROFILE_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "profiler/aggregate/profile.h"

namespace gpuflame::exporters {

struct ProfileLimits {
  size_t max_samples = 16000;
  size_t max_depth = 1000;
  size_t max_bytes = 4u << 20;  // serialized, uncompressed
  size_t max_name_length = 65535;
};

struct LimitReport {
  size_t folded_samples = 0;    // samples merged into [other]
  size_t truncated_stacks = 0;  // stacks cut to max_depth (root side dropped)
  bool changed() const { return folded_samples || truncated_stacks; }
};

LimitReport EnforceLimits(profiler::Profile& profile, const ProfileLimits& limits = {});

inline constexpr const char* kOtherFrame = "[other]";

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PPROF_PROFILE_LIMITS_H_
