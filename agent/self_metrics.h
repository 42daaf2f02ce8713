// The agent's own Prometheus metrics (/metrics): one snapshot struct,
// gathered on the event loop from every part of the pipeline, and the pure
// function that turns it into the metric list. Names, help texts and types
// are an interface (dashboards, alerts, tests): change them never lightly.
#ifndef GPUFLAME_AGENT_SELF_METRICS_H_
#define GPUFLAME_AGENT_SELF_METRICS_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent/incident_traces.h"
#include "agent/metrics_server.h"
#include "agent/window_export.h"
#include "exporters/pyroscope/push_queue.h"
#include "profiler/collectives/nccl_tracker.h"
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
  LaunchRouteStats launch_route;        // the launch route's join (--launch-stacks uprobes)
  uint64_t launch_route_held = 0;       // ... its hits waiting for their records now
  LaunchRouteSiteStats launch_windows;  // ... and its uprobes' windows
  LibraryCost events_library;  // libgpuflame_cupti.so's own time, as the processes report it
  ResolveStats resolver;
  UnwindStats unwinder;
  Session::SymbolFiles symbol_files;  // library files parsed, and those let go
  RefreshStats refresher;
  uint64_t native_frames_unresolved = 0;
  uint64_t processes_attached = 0;  // known and not exited
  uint64_t library_files_attached = 0;
  ProcessRegistry::GateStats gates;           // processes held at the machine-wide gate
  double window_snapshot_seconds = 0;         // the event loop's part of the last window close
  Guardrails::Usage self_usage;               // gpuflame's own CPU and memory, last reading
  uint32_t shedding = 0;                      // ShedAction bits in force
  uint64_t thrift_files_short = 0;            // library files holding fewer thrift sites than asked
  double self_cpu_seconds = -1;               // gpuflame's own CPU time so far (-1: unreadable)
  bool bpf_stats_on = false;                  // the kernel's BPF run-time stats (ProgramStats)
  std::vector<ProgramRunStats> bpf_programs;  // each program's runs and run time since load
  ExportStats exported;
  exporters::PushStats push;
  OomStats oom;                     // out-of-memory episodes and their captures
  NcclStats nccl;                   // NCCL calls and hangs (profiler/collectives/)
  uint64_t nccl_stuck[2] = {0, 0};  // hangs still stuck at the last check, by NcclHang::Side
  // Straggler judgement per rank (NcclStragglers), since its communicator
  // was first seen, retired ranks' last totals included for a while
  // (NcclRankTotals); at most kMaxStragglerSeries ranks, those that held the
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
  uint64_t nccl_retired_ranks_dropped = 0;  // retired ranks' totals dropped early (NcclRankTotals::kMaxKept)
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

// The straggler counters per rank (gpuflame_nccl_straggler_wait_seconds_total
// and its siblings), kept past the rank's end. The agent retires an exited
// process a window after its exit, and its communicator with its last rank
// (NcclTracker::ForgetProcesses): read from the tracker alone, a short job's
// counters would be published for a second or two, and a Prometheus scrape
// every 15 s would most often miss its straggler. So each rank's totals are
// read before every retirement and every metrics snapshot, and a rank no
// longer in the tracker keeps its last totals, published unchanged, for
// kKeepNs (10 minutes: many scrapes, and long enough for a rate() or
// increase() over the job's end); then it goes (a series that ends is stale
// to Prometheus, not reset). At most kMaxKept ranks in all: past that the
// ranks retired longest ago go first, counted. A rank seen again (the same
// communicator and rank) carries on from the tracker's figures.
// Event loop only.
class NcclRankTotals {
 public:
  static constexpr uint64_t kKeepNs = 600'000'000'000ull;  // 10 minutes
  static constexpr size_t kMaxKept = 1024;

  // The tracker's ranks now (CLOCK_MONOTONIC |now_ns|); retired ones past
  // kKeepNs go.
  void Update(const NcclTracker& t, uint64_t now_ns);
  // Into |s|: every rank kept, live and retired, those that held the others
  // up longest first, bounded by AgentStats::kMaxStragglerSeries (the rest
  // counted in nccl_ranks_omitted).
  void Fill(AgentStats& s) const;
  size_t size() const { return ranks_.size(); }
  bool contains(const NcclCommId& id, int rank) const { return ranks_.contains(std::pair{id, rank}); }
  uint64_t dropped() const { return dropped_; }

 private:
  struct Kept {
    AgentStats::NcclRankWait wait;
    uint64_t seen_ns = 0;  // the last Update that found it in the tracker
  };
  absl::flat_hash_map<std::pair<NcclCommId, int>, Kept> ranks_;
  uint64_t dropped_ = 0;
};

// Event loop: reads the pipeline's counters (Session is not thread-safe).
// |window_snapshot_seconds|: how long the last window close held the loop.
// nccl_ranks is left empty: NcclRankTotals::Fill.
AgentStats CollectAgentStats(Session& session, double window_snapshot_seconds, const ExportStats& exported,
                             const exporters::PushStats& push);

std::vector<Metric> SelfMetrics(const AgentStats& s);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_AGENT_SELF_METRICS_H_
