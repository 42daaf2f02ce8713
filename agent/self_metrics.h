// The agent's own Prometheus metrics (/metrics): one snapshot struct,
// gathered on the event loop from every part of the pipeline, and the pure
// function that turns it into the metric list. Names, help texts and types
// are an interface (dashboards, alerts, tests): change them never lightly.
#ifndef GPUFLAME_AGENT_SELF_METRICS_H_
#define GPUFLAME_AGENT_SELF_METRICS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/incident_traces.h"
#include "agent/metrics_server.h"
#include "agent/window_export.h"
#include "exporters/pyroscope/push_queue.h"
#include "profiler/pipeline/session.h"
#include "profiler/timeline/flight_ring.h"

namespace gpuflame::profiler {

struct AgentStats {
  std::array<uint64_t, GF_STAT_MAX> bpf{};
  RingReaderStats reader;
  ProcessorStats events;
  TrackerStats tracker;
  uint64_t live_allocations = 0;
  // The agent's own tables, which must not grow with process churn.
  uint64_t stacks = 0;     // interned stacks in use (retired ones excluded)
  uint64_t frames = 0;     // interned frames (shared by every process)
  uint64_t processes = 0;  // registry entries, exited but not yet retired included
  JoinStats joiner;
  LibraryCost events_library;  // libgpuflame_cupti.so's own time, as the processes report it
  ResolveStats resolver;
  UnwindStats unwinder;
  RefreshStats refresher;
  uint64_t native_frames_unresolved = 0;
  uint64_t processes_attached = 0;  // known and not exited
  uint64_t library_files_attached = 0;
  ProcessRegistry::GateStats gates;  // processes held at the machine-wide gate
  double window_snapshot_seconds = 0;         // the event loop's part of the last window close
  Guardrails::Usage self_usage;               // gpuflame's own CPU and memory, last reading
  uint32_t shedding = 0;                      // ShedAction bits in force
  double self_cpu_seconds = -1;               // gpuflame's own CPU time so far (-1: unreadable)
  bool bpf_stats_on = false;                  // the kernel's BPF run-time stats (ProgramStats)
  std::vector<ProgramRunStats> bpf_programs;  // each program's runs and run time since load
  ExportStats exported;
  exporters::PushStats push;
  OomStats oom;  // out-of-memory episodes and their captures
  NcclStats nccl;           // NCCL calls and hangs (profiler/collectives/)
  uint64_t nccl_stuck[2] = {0, 0};  // hangs still stuck at the last check, by NcclHang::Side
  // Straggler judgement per rank (NcclStragglers), since its communicator
  // was first seen; at most kMaxStragglerSeries ranks, those that held the
  // others up longest first, the rest counted.
  struct NcclRankWait {
    std::string communicator;  // its ID's first 16 hex digits
    int rank = -1;
    uint64_t held_ns = 0;    // the other ranks' waits for it
    uint64_t waited_ns = 0;  // its own waits for the last rank
    uint64_t last = 0;       // collectives it entered last
  };
  static constexpr size_t kMaxStragglerSeries = 256;
  std::vector<NcclRankWait> nccl_ranks;
  uint64_t nccl_ranks_omitted = 0;
  // The flight recorder (flight_recorder.h), when on.
  struct Flight {
    bool on = false;
    timeline::FlightRingStats ring;
    uint64_t bytes = 0;
    uint64_t requested = 0, requests_failed = 0, oom = 0, nccl_hang = 0;  // traces written, by trigger
    // How long writing the last trace held the event loop.
    double last_trace_seconds = 0;
    IncidentTraceStats incidents;
  } flight;
};

// Event loop: reads the pipeline's counters (Session is not thread-safe).
// |window_snapshot_seconds|: how long the last window close held the loop.
AgentStats CollectAgentStats(Session& session, double window_snapshot_seconds, const ExportStats& exported,
                             const exporters::PushStats& push);

std::vector<Metric> SelfMetrics(const AgentStats& s);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_SELF_METRICS_H_
