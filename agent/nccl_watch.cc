#include "agent/nccl_watch.h"

#include <string>
#include <vector>

#include "logging/log.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/process/process_state.h"

namespace gpuflame::profiler {
namespace {

// The fields a log reader filters a hang by: the process and, where it runs
// in Kubernetes, its pod.
std::vector<logging::Field> HangFields(Session& session, const NcclHang& h) {
  std::vector<logging::Field> f = {
      {"pid", h.pid}, {"hang", h.number}, {"side", h.side == NcclHang::Side::kGpu ? "gpu" : "call"}};
  if (h.rank >= 0) f.emplace_back("rank", h.rank);
  if (const ProcessInfo* info = session.registry().Find(h.pid); info && info->pod.in_kubernetes()) {
    f.emplace_back("namespace", info->pod.namespace_name);
    f.emplace_back("pod", info->pod.pod);
  }
  return f;
}

}  // namespace

NcclWatch::NcclWatch(Session& session, double hang_seconds) {
  NcclTracker& t = session.events().nccl();
  t.SetHangThreshold(static_cast<uint64_t>(hang_seconds * 1e9));
  // Each hang is said while stuck and when over; then it goes, so that
  // the agent's bound (NcclTracker::kMaxHangs) is on hangs stuck at once,
  // not on every hang of its lifetime.
  t.ForgetEndedHangs();
}

std::vector<NcclHang> NcclWatch::Tick(Session& session, uint64_t now_ns) {
  NcclTracker& t = session.events().nccl();
  std::vector<NcclHang> found;
  if (now_ns >= next_ns_) {
    next_ns_ = now_ns + 1'000'000'000;
    t.Tick(now_ns);
    found = t.TakeFound();
    for (const NcclHang& h : found)
      logging::Warning(NcclHangLine(h, session.events().stack_source(), ProcessStateName, now_ns),
                       HangFields(session, h));
  }
  // Ended hangs every turn, not once a second: the window close that
  // follows in the same turn retires exited processes, and with them their
  // stacks (NcclTracker::ForgetStacks sets a hang's to none, and the id may
  // go to another process's stack). A hang that returned just before its
  // process exited, still in the tracker at that close, was pushed as
  // "[ncclSend: stack unknown]" in the window it ended in. Taken here, it
  // reaches the window (WindowSnapshotter::OnHangsEnded) before that.
  CollectEnded(session);
  return found;
}

void NcclWatch::CollectEnded(Session& session) {
  for (NcclHang& h : session.events().nccl().TakeEnded()) {
    logging::Info(NcclHangEndLine(h), HangFields(session, h));
    ended_.push_back(std::move(h));
  }
}

}  // namespace gpuflame::profiler
