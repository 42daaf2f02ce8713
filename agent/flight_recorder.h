// The agent's flight recorder: a timeline (profiler/timeline) collected all
// the time into a FlightRing, the last few seconds of every followed
// process in bounded memory, and the trace of some of them written from it
// on demand (GET /timeline, trace_requests.h) or on an incident
// (incident_traces.h). The writer is record --timeline's (exporters/trace),
// given a snapshot instead of the whole recording.
//
// Why the trace is written here, on the event loop: its names come from the
// pipeline's stack and frame tables, which only the event loop may read.
// The JSON is bounded (kMaxTraceBytes) and the ring by its options; the
// gzip and the I/O are the caller's, on its own thread.
// Not thread-safe: event loop only.
#ifndef GPUFLAME_AGENT_FLIGHT_RECORDER_H_
#define GPUFLAME_AGENT_FLIGHT_RECORDER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "profiler/pipeline/session.h"
#include "profiler/timeline/flight_ring.h"
#include "profiler/timeline/timeline.h"

namespace gpuflame::profiler {

// Which processes a trace is of: those listed, and those of the pod (or,
// with a namespace alone, of every pod in it). Nothing named: every
// process the agent reports.
struct TraceQuery {
  std::vector<pid_t> pids;
  std::string namespace_name;
  std::string pod;
  double seconds = 0;  // the last this many (0 or over the window: the whole window)

  static TraceQuery Of(std::vector<pid_t> pids) {
    TraceQuery q;
    q.pids = std::move(pids);
    return q;
  }
};

struct FlightTrace {
  std::string json;
  std::vector<pid_t> pids;
  uint64_t events = 0;   // trace events written
  uint64_t missing = 0;  // evicted by the bounds (and over the JSON's size), in its processes
};

class FlightRecorder {
 public:
  // The JSON of one trace at most (later events left out, counted): about
  // 400 000 trace events. While a trace is written the agent holds it, the
  // snapshot it came from (72 bytes an event) and the gzip, up to ~150 MB
  // over the ring with everything at its bounds: inside the agent's memory
  // budget (768 MiB) and the chart's limit (1 GiB).
  static constexpr uint64_t kMaxTraceBytes = uint64_t{64} << 20;

  // Off (nothing attached, no cost) when cfg.flight.seconds is 0.
  FlightRecorder(Session& session, const AgentConfig& cfg);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool on() const { return timeline_ != nullptr; }
  // The trace |query| asks for, as of |now_ns| (CLOCK_MONOTONIC). NotFound
  // when it names no process the agent reports; FailedPrecondition when off.
  absl::StatusOr<FlightTrace> Trace(const TraceQuery& query, const std::string& why, uint64_t now_ns);
  timeline::FlightRingStats stats() const { return ring_ ? ring_->stats() : timeline::FlightRingStats{}; }
  // Bytes the ring's buffers hold now.
  uint64_t bytes() const { return stats().capacity * timeline::FlightRing::kSlotBytes; }

 private:
  std::vector<pid_t> Select(const TraceQuery& query) const;

  Session& session_;
  const AgentConfig& cfg_;
  std::unique_ptr<timeline::FlightRing> ring_;
  std::unique_ptr<timeline::Timeline> timeline_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_FLIGHT_RECORDER_H_
