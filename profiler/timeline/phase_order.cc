#include "profiler/timeline/phase_order.h"

#include <algorithm>

namespace gpuflame::profiler::timeline {

void PhaseOrder::Add(uint64_t thread, uint64_t ts_ns, StackId stack, bool exact) {
  held_.push({ts_ns, seq_++, thread, stack, exact});
  newest_ns_ = std::max(newest_ns_, ts_ns);
  while (!held_.empty() && (held_.top().ts_ns + kDelayNs <= newest_ns_ || held_.size() > kMaxHeld)) ReleaseTop();
}

void PhaseOrder::Drain() {
  while (!held_.empty()) ReleaseTop();
}

void PhaseOrder::ReleaseTop() {
  const Held h = held_.top();
  held_.pop();
  release_(h.thread, h.ts_ns, h.stack, h.exact);
}

}  // namespace gpuflame::profiler::timeline
