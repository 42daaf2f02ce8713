// The exporter-neutral profile: what every writer (pprof, folded, HTML,
// Pyroscope) consumes. Frames are stored once and referenced by index;
// sample stacks are root first.
#ifndef GPUFLAME_PROFILER_AGGREGATE_PROFILE_H_
#define GPUFLAME_PROFILER_AGGREGATE_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "symbolizer/frame.h"

namespace gpuflame::profiler {

struct ValueType {
  std::string type;  // "alloc_space"
  std::string unit;  // "bytes"
};

struct Label {
  std::string key;
  std::string str;  // a string label, or
  int64_t num = 0;  // a numeric one (when str is empty)
};

struct Sample {
  std::vector<uint32_t> frames;  // indices into Profile::frames, root first
  std::vector<int64_t> values;   // one per sample type
  std::vector<Label> labels;
};

struct Profile {
  std::string name;  // "gpu_memory", "torch_memory"
  std::vector<ValueType> sample_types;
  std::string default_sample_type;
  ValueType period_type;
  int64_t period = 0;
  int64_t time_nanos = 0;
  int64_t duration_nanos = 0;
  std::vector<symbolizer::Frame> frames;
  std::vector<Sample> samples;
  std::vector<std::string> comments;

  int SampleTypeIndex(const std::string& type) const {
    for (size_t i = 0; i < sample_types.size(); i++)
      if (sample_types[i].type == type) return static_cast<int>(i);
    return -1;
  }
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_AGGREGATE_PROFILE_H_
