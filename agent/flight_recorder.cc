#include "agent/flight_recorder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/selection.h"
#include "base/json_string.h"
#include "exporters/trace/chrome_trace.h"

namespace gpuflame::profiler {

FlightRecorder::FlightRecorder(Session& session, const AgentConfig& cfg) : session_(session), cfg_(cfg) {
  if (cfg.flight.seconds <= 0) return;
  const uint64_t slot = timeline::FlightRing::kSlotBytes;
  ring_ = std::make_unique<timeline::FlightRing>(
      timeline::FlightRingOptions{.window_ns = static_cast<uint64_t>(cfg.flight.seconds * 1e9),
                                  .max_process_events = cfg.flight.process_max_bytes / slot,
                                  .max_total_events = cfg.flight.max_bytes / slot});
  timeline::TimelineOptions o;
  o.sample_period_ns = static_cast<uint64_t>(session.events().cpu_period_ns());
  o.max_events = ring_->options().max_total_events;  // the ring's bound, said in each trace's metadata
  timeline_ = std::make_unique<timeline::Timeline>(session.events().stacks(), session.events().frames(), std::move(o),
                                                   ring_.get());
  session.events().SetTimeline(timeline_.get());
}

FlightRecorder::~FlightRecorder() {
  if (timeline_) session_.events().SetTimeline(nullptr);
}

std::vector<pid_t> FlightRecorder::Select(const TraceQuery& q) const {
  std::vector<pid_t> out;
  const bool by_pod = !q.namespace_name.empty() || !q.pod.empty();
  for (const auto& [pid, info] : session_.registry().processes()) {
    // What the agent does not report, it does not trace either.
    if (!Selected(cfg_.select, pid, info->comm, info->pod)) continue;
    const bool listed = std::find(q.pids.begin(), q.pids.end(), pid) != q.pids.end();
    const bool in_pod = by_pod && (q.namespace_name.empty() || info->pod.namespace_name == q.namespace_name) &&
                        (q.pod.empty() || info->pod.pod == q.pod);
    if (listed || in_pod || (q.pids.empty() && !by_pod)) out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<FlightTrace> FlightRecorder::Trace(const TraceQuery& query, const std::string& why, uint64_t now_ns) {
  if (!on()) return absl::FailedPreconditionError("the flight recorder is off (flight_recorder_seconds is 0)");
  FlightTrace out;
  out.pids = Select(query);
  if (out.pids.empty()) {
    std::vector<std::string> asked;
    for (pid_t pid : query.pids) asked.push_back(absl::StrCat("pid ", pid));
    if (!query.namespace_name.empty()) asked.push_back(absl::StrCat("namespace ", query.namespace_name));
    if (!query.pod.empty()) asked.push_back(absl::StrCat("pod ", query.pod));
    return absl::NotFoundError(
        absl::StrCat("no process the agent follows is ", asked.empty() ? "there" : absl::StrJoin(asked, " or ")));
  }
  const uint64_t window_ns = ring_->options().window_ns;
  const uint64_t span_ns =
      query.seconds > 0 ? std::min(window_ns, static_cast<uint64_t>(query.seconds * 1e9)) : window_ns;
  const uint64_t since_ns = now_ns > span_ns ? now_ns - span_ns : 0;
  std::vector<uint32_t> pids(out.pids.begin(), out.pids.end());
  const std::deque<timeline::Event> events = timeline_->Snapshot(pids, since_ns, now_ns);

  exporters::ChromeTraceOptions o;
  o.max_bytes = kMaxTraceBytes;
  o.events = &events;
  o.title = absl::StrCat("gpuflame agent on ", cfg_.node, ": ", why);
  // What the trace says of the recorder itself: its bounds, and per process
  // what it held and what the bounds evicted (in this trace's seconds, and
  // since the process was first seen).
  std::string processes;
  for (pid_t pid : out.pids) {
    const auto upid = static_cast<uint32_t>(pid);
    const timeline::FlightProcessStats s = ring_->ProcessStats(upid);
    const uint64_t evicted = ring_->EvictedSince(upid, since_ns);
    out.missing += evicted;
    const ProcessInfo* info = session_.registry().Find(pid);
    if (info) o.process_names[upid] = info->comm;
    absl::StrAppend(&processes, processes.empty() ? "" : ",", "{\"pid\":", pid,
                    ",\"namespace\":", base::JsonString(info ? info->pod.namespace_name : ""),
                    ",\"pod\":", base::JsonString(info ? info->pod.pod : ""), ",\"events_held\":", s.events,
                    ",\"evicted_in_these_seconds\":", evicted, ",\"evicted_since_first_seen\":", s.evicted,
                    ",\"aged_out_since_first_seen\":", s.aged_out, "}");
  }
  o.missing = out.missing;
  o.metadata =
      absl::StrCat("\"flight_recorder\":{\"why\":", base::JsonString(why), ",\"from_ns\":", since_ns,
                   ",\"to_ns\":", now_ns, ",\"window_ns\":", window_ns, ",\"max_bytes\":", cfg_.flight.max_bytes,
                   ",\"process_max_bytes\":", cfg_.flight.process_max_bytes, ",\"note\":",
                   base::JsonString("evicted: pushed out by the memory bounds before they were older than the "
                                    "window (counted to the second); spans begun before from_ns begin there; an "
                                    "NCCL call still in flight ends at to_ns, unfinished"),
                   ",\"processes\":[", processes, "]}");
  exporters::ChromeTraceStats stats;
  out.json = exporters::ChromeTraceJson(*timeline_, o, &stats);
  out.events = stats.events;
  out.missing += stats.dropped_for_bytes_total();
  return out;
}

}  // namespace gpuflame::profiler
