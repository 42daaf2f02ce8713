// The phases' inputs put back in time order before they reach their span
// merger. Phases are cut from CPU samples and from the exact stacks of
// calls and allocations; the tensor allocations' stacks come from the
// injection library in batches, up to a flush tick (100 ms) after CPU
// samples taken later, and a merger fed as they arrive would leave them out
// as late. Held for kDelayNs and released in time order, the first
// allocation of a step gives the step's phase its beginning, where the
// next sampling tick (up to 10.3 ms later at 97 Hz) gave it before.
// Bounded: past kMaxHeld the oldest goes at once. Not thread-safe: event
// loop only (the timeline's collector calls it).
#ifndef GPUFLAME_PROFILER_TIMELINE_PHASE_ORDER_H_
#define GPUFLAME_PROFILER_TIMELINE_PHASE_ORDER_H_

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler::timeline {

class PhaseOrder {
 public:
  static constexpr uint64_t kDelayNs = 300'000'000;
  // 8 MiB (32 bytes each); a launch-bound step loop sends ~125k a second.
  static constexpr size_t kMaxHeld = size_t{1} << 18;
  // |exact|: a call's or allocation's stack at its time; else a CPU sample.
  using Release = std::function<void(uint64_t thread, uint64_t ts_ns, StackId stack, bool exact)>;
  explicit PhaseOrder(Release release) : release_(std::move(release)) {}

  void Add(uint64_t thread, uint64_t ts_ns, StackId stack, bool exact);
  // Releases everything held, in order: the recording's end, a process's exit.
  void Drain();
  size_t held() const { return held_.size(); }

 private:
  struct Held {
    uint64_t ts_ns = 0;
    uint64_t seq = 0;  // arrival: inputs of one instant keep their order
    uint64_t thread = 0;
    StackId stack = 0;
    bool exact = false;
    bool operator>(const Held& o) const { return ts_ns != o.ts_ns ? ts_ns > o.ts_ns : seq > o.seq; }
  };
  void ReleaseTop();

  Release release_;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held_;
  uint64_t newest_ns_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace gpuflame::profiler::timeline

#endif  // GPUFLAME_PROFILER_TIMELINE_PHASE_ORDER_H_
