#include "profiler/aggregate/window.h"

namespace gpuflame::profiler {

std::vector<StackCounters> WindowAccumulator::Close(const std::vector<StackCounters>& cumulative) {
  last_.resize(cumulative.size());
  std::vector<StackCounters> out(cumulative.size());
  for (size_t i = 0; i < cumulative.size(); i++) {
    out[i].alloc_objects = cumulative[i].alloc_objects - last_[i].alloc_objects;
    out[i].alloc_bytes = cumulative[i].alloc_bytes - last_[i].alloc_bytes;
    out[i].inuse_objects = cumulative[i].inuse_objects;
    out[i].inuse_bytes = cumulative[i].inuse_bytes;
    out[i].alloc_samples = cumulative[i].alloc_samples - last_[i].alloc_samples;
    out[i].observed_bytes = cumulative[i].observed_bytes - last_[i].observed_bytes;
    out[i].peak_objects = cumulative[i].peak_objects;  // the window's own (PeakScope::kWindow)
    out[i].peak_bytes = cumulative[i].peak_bytes;
    out[i].unused_objects = cumulative[i].unused_objects;  // at the window's end, as in use
    out[i].unused_bytes = cumulative[i].unused_bytes;
    last_[i] = cumulative[i];
  }
  return out;
}

void WindowAccumulator::Forget(const std::vector<StackId>& ids) {
  for (StackId id : ids)
    if (id < last_.size()) last_[id] = StackCounters{};
}

}  // namespace gpuflame::profiler
