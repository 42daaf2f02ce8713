// `gpuflame agent`: the orchestration. Each job lives in its own file:
//   delivery         Pyroscope client + PushQueue (sender thread, spool)
//   window_snapshot  window close -> per-process profiles (event loop)
//   window_export    limits, encoding, labels, enqueue (export thread)
//   oom_push         out-of-memory captures, pushed as they end
//   labels           series labels; selection: which processes are reported
//   retirement       exited processes forgotten after their last window
//   self_metrics     the /metrics list, from one stats snapshot
//   flight_recorder  each process's last seconds of timeline events, traces of them
//   trace_requests   GET /timeline, from the metrics server's threads to the loop
//   incident_traces  a trace on an OOM or an NCCL hang, written to a directory
//
// Threads: the ring-buffer reader (Session's), this one (the event loop:
// Poll, window snapshots, retirement, metrics snapshots, traces), the export
// thread (WindowExporter), the push sender (PushQueue), the metrics server
// and the incident traces' writer.
#include "agent/agent_command.h"
#include "base/redact.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/delivery.h"
#include "agent/flight_recorder.h"
#include "agent/gpu_metrics.h"
#include "agent/gpu_utilization.h"
#include "agent/incident_traces.h"
#include "agent/labels.h"
#include "agent/metrics_server.h"
#include "agent/nccl_watch.h"
#include "agent/oom_push.h"
#include "agent/retirement.h"
#include "agent/self_metrics.h"
#include "agent/trace_requests.h"
#include "agent/window_export.h"
#include "agent/window_snapshot.h"
#include "logging/log.h"
#include "profiler/devices/gpu_reader.h"
#include "profiler/pipeline/session.h"
#include "profiler/process/guardian.h"
#include "profiler/process/run_control.h"

namespace gpuflame::profiler {
namespace {

int Fail(const absl::Status& s) {
  logging::Error(s.message());
  logging::Flush();
  return 2;
}

// The event loop's part of a window close, timed (the gauge says how long it
// held the loop), then the hand-off to the export thread and retirement.
double CloseWindow(Session& session, WindowSnapshotter& snapshots, WindowExporter& exporter, NcclRankTotals& ranks,
                   int64_t start_wall, int64_t duration) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<ProcessWindow> window = snapshots.Close(session, start_wall, duration);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  exporter.Submit(std::move(window));
  // After the snapshot: the profiles above hold their own copies. The
  // straggler counters are read first: a retired rank's are kept a while.
  ranks.Update(session.events().nccl(), static_cast<uint64_t>(NowNs(CLOCK_MONOTONIC)));
  snapshots.Forget(RetireExitedProcesses(session));
  return seconds;
}

// /healthz fails when the event loop or the ring reader has not gone round
// for 20 s: each turns at least every 20 ms when healthy; the longest
// legitimate turn seen is a gate held 4.4 s on a loaded CI machine.
MetricsServer::HealthCheck StallCheck(const Session& session) {
  constexpr int64_t kStalledNs = 20'000'000'000;
  const base::Heartbeat& loop = session.worker_heartbeat();
  const base::Heartbeat& reader = session.reader_heartbeat();
  return [&loop, &reader] {
    std::string problem;
    for (const auto& [name, beat] : {std::pair{"event loop", &loop}, std::pair{"ring-buffer reader", &reader}})
      if (const int64_t ns = beat->StalledNs(); ns > kStalledNs)
        absl::StrAppendFormat(&problem, "%s%s stalled for %.0f s", problem.empty() ? "" : "; ", name, ns / 1e9);
    return problem;
  };
}

// A trace from the flight recorder, timed (the gauge says how long it held the loop).
absl::StatusOr<FlightTrace> TimedTrace(FlightRecorder& flight, const TraceQuery& query, const std::string& why,
                                       AgentStats::Flight& counts) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<FlightTrace> trace = flight.Trace(query, why, static_cast<uint64_t>(NowNs(CLOCK_MONOTONIC)));
  counts.last_trace_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return trace;
}

// The trace of one incident, from the flight recorder to the incident
// traces' writer (which logs its path), counted in |written|.
void TraceIncident(FlightRecorder& flight, IncidentTraces& incidents, const TraceQuery& query, const std::string& name,
                   const std::string& why, AgentStats::Flight& counts, uint64_t& written) {
  if (!flight.on() || !incidents.on()) return;
  absl::StatusOr<FlightTrace> trace = TimedTrace(flight, query, why, counts);
  if (!trace.ok()) {
    logging::Info(absl::StrCat("no incident trace for ", why, ": ", trace.status().message()));
    return;
  }
  std::vector<std::pair<std::string, std::string>> fields;
  // One key, as the other lines of the process say it (pid=N), or the list.
  fields.emplace_back(trace->pids.size() == 1 ? "pid" : "pids", absl::StrJoin(trace->pids, ","));
  fields.emplace_back("events", std::to_string(trace->events));
  if (trace->missing) fields.emplace_back("missing", std::to_string(trace->missing));
  if (incidents.Submit(name, std::move(trace->json), std::move(fields))) written++;
}

// A GET /timeline, answered on the event loop.
TraceReply AnswerTrace(FlightRecorder& flight, const TraceQuery& query, AgentStats::Flight& counts) {
  absl::StatusOr<FlightTrace> trace = TimedTrace(flight, query, "asked for (GET /timeline)", counts);
  if (!trace.ok()) {
    counts.requests_failed++;
    const int status = trace.status().code() == absl::StatusCode::kNotFound ? 404 : 409;
    return {status, absl::StrCat(trace.status().message(), "\n"), ""};
  }
  counts.requested++;
  std::string name =
      trace->pids.size() == 1 ? absl::StrCat("pid", trace->pids[0]) : absl::StrCat(trace->pids.size(), "-processes");
  return {200, std::move(trace->json), absl::StrCat(kIncidentTracePrefix, name, ".json.gz")};
}

}  // namespace

int RunAgent(const AgentConfig& cfg) {
  logging::Configure(cfg.log);
  Guardian guardian = Guardian::Start();  // before any thread (profiler/process/guardian.h)
  Session::Options sopt;
  sopt.system_wide = true;
  sopt.profiling = cfg.profiling;
  sopt.symbol_keep_ns = static_cast<int64_t>(cfg.symbol_cache_keep_seconds * 1e9);
  auto started = Session::Start(sopt);
  if (!started.ok()) return Fail(started.status());
  Session& session = **started;
  auto delivery = Delivery::Start(cfg);
  if (!delivery.ok()) return Fail(delivery.status());
  // The driver's figures of every GPU (NVML), for /metrics and the lanes'
  // verdict: a reading a second on a thread of its own, the last minute kept,
  // or a window and the reorder horizon's 3 s behind it (a lane's judged
  // stretch) with room to spare.
  std::unique_ptr<utilization::GpuSampler> gpus;
  if (cfg.metrics_port != 0) {
    const auto keep = std::chrono::seconds(std::max<int64_t>(60, static_cast<int64_t>(2 * cfg.window_seconds) + 10));
    if (auto reader = GpuReader::Open(); reader.ok())
      gpus = std::make_unique<utilization::GpuSampler>(
          std::move(*reader),
          utilization::GpuSamplerOptions{.interval = std::chrono::milliseconds(1000), .retention = keep});
    else logging::Info("GPU figures not read", {{"why", std::string(reader.status().message())}});
  }
  // Before the metrics server, which may still be answering /timeline
  // while it stops: the requests outlive it.
  TraceRequests trace_requests;
  FlightRecorder flight(session, cfg);
  IncidentTraces incidents(cfg.flight);
  AgentStats::Flight flight_counts;
  MetricsServer metrics;
  if (cfg.metrics_port != 0 && flight.on()) metrics.AddRoute("/timeline", TimelineRoute(trace_requests));
  if (cfg.metrics_port != 0)
    if (auto s = metrics.Start(cfg.metrics_address, cfg.metrics_port, StallCheck(session)); !s.ok()) return Fail(s);
  WindowSnapshotter snapshots(cfg);
  // Why the GPU idles, per process and GPU: CUPTI's records judged inside
  // the library's on-spans each window (agent/gpu_utilization.h), with kernel time.
  std::unique_ptr<utilization::Utilization> util;
  GpuUtilizationMetrics util_metrics;
  if (cfg.profiling.kernel_time) {
    utilization::UtilizationOptions uo;
    uo.max_samples = 1 << 18;  // the window's CPU samples, for the gaps' join (4 MiB)
    uo.windowed = true;
    util = std::make_unique<utilization::Utilization>(uo);
    session.events().SetUtilization(util.get());
    GpuOf gpu_of;
    DeviceOver over;
    if (gpus) {
      gpu_of = [&gpus](pid_t pid, const std::string& uuid) -> std::optional<GpuIdentity> {
        if (!uuid.empty()) {
          const GpuIdentity* g = gpus->GpuWithUuid(uuid);
          return g ? std::optional<GpuIdentity>(*g) : std::nullopt;
        }
        std::optional<GpuIdentity> found;
        for (const utilization::GpuNow& g : gpus->Recent(0))
          if (g.stats.process_sm.contains(static_cast<uint32_t>(pid))) {
            if (found) return std::nullopt;  // on more than one GPU: which lane is which is not known
            found = g.id;
          }
        return found;
      };
      // The readings of the lane's judged stretch: a minute is kept, the
      // stretch is a window and the reorder horizon (3 s) behind.
      over = [&gpus](uint32_t index, uint64_t from, uint64_t to) { return gpus->Over(index, from, to); };
    }
    snapshots.SetUtilization(util.get(), &util_metrics, std::move(gpu_of), std::move(over));
  }
  NcclWatch nccl(session, cfg.nccl_hang_seconds);
  NcclRankTotals rank_totals;  // the straggler counters, retired ranks' kept 10 minutes
  WindowExporter exporter(SeriesLabeler(cfg.service_name, cfg.node, cfg.kubelet, cfg.labels), (*delivery)->queue());
  InstallStopHandlers(/*sigint=*/true);
  logging::Info("agent pushing to Pyroscope",
                {{"url", base::RedactUrl(cfg.pyroscope.url)},
                 {"protocol", cfg.protocol},
                 {"window_seconds", cfg.window_seconds},
                 {"metrics_port", cfg.metrics_port ? metrics.port() : 0},
                 {"node", cfg.node},
                 {"kernel_activity", cfg.profiling.kernel_time_exact ? "exact" : "sampled"},
                 {"launch_stacks", cfg.profiling.launch_uprobes ? "uprobes" : "callbacks"},
                 {"tensor_sampling", cfg.profiling.tensor_exact ? "exact" : "sampled"},
                 {"tensor_startup_s", cfg.profiling.tensor_startup_s}});

  const auto window_ns = static_cast<int64_t>(cfg.window_seconds * 1e9);
  int64_t window_start = NowNs(CLOCK_MONOTONIC);
  int64_t window_start_wall = NowNs(CLOCK_REALTIME);
  int64_t last_metrics = 0;
  double snapshot_seconds = 0;
  const int64_t agent_start = window_start;
  size_t shed_said = 0;
  while (!StopRequested()) {
    if (int n = session.Poll(20); n < 0 && n != -EINTR) {
      logging::Error(absl::StrCat("reading events failed: ", std::strerror(-n)));
      break;
    }
    for (const std::string& w : session.TakeWarnings()) logging::Warning(w);
    // At once, not at the window's end; with the seconds before it, kept.
    for (pid_t pid : PushOomCaptures(cfg, session, exporter))
      TraceIncident(flight, incidents, TraceQuery::Of({pid}), absl::StrCat("oom-pid", pid),
                    absl::StrCat("out-of-memory in pid ", pid), flight_counts, flight_counts.oom);
    trace_requests.Serve([&](const TraceQuery& q) { return AnswerTrace(flight, q, flight_counts); });
    // Each change of what gpuflame sheds to stay in its budget, once.
    if (session.guardrails().changes().size() > shed_said) {
      std::vector<std::string> shed = session.guardrails().Describe(agent_start);
      for (size_t i = shed_said; i < shed.size(); i++) logging::Warning(shed[i]);
      shed_said = shed.size();
    }
    int64_t now = NowNs(CLOCK_MONOTONIC);
    // Each hang said while stuck, and when over; traced when found, with
    // the ranks it waits for that this node runs.
    for (const NcclHang& h : nccl.Tick(session, static_cast<uint64_t>(now))) {
      TraceQuery q = TraceQuery::Of({h.pid});
      for (const NcclAbsentRank& r : h.absent)
        if (r.pid > 0 && q.pids.size() < 64) q.pids.push_back(r.pid);
      TraceIncident(flight, incidents, q, absl::StrCat("nccl-hang", h.number, "-pid", h.pid),
                    absl::StrCat("NCCL hang #", h.number, " in pid ", h.pid), flight_counts, flight_counts.nccl_hang);
    }
    snapshots.OnHangsEnded(nccl.TakeEnded());
    if (now - window_start >= window_ns) {
      snapshot_seconds = CloseWindow(session, snapshots, exporter, rank_totals, window_start_wall, now - window_start);
      window_start = now;
      window_start_wall = NowNs(CLOCK_REALTIME);
    }
    if (cfg.metrics_port != 0 && now - last_metrics > 1'000'000'000) {
      AgentStats stats = CollectAgentStats(session, snapshot_seconds, exporter.stats(), (*delivery)->queue().Stats());
      rank_totals.Update(session.events().nccl(), static_cast<uint64_t>(now));
      rank_totals.Fill(stats);
      stats.flight = flight_counts;
      stats.flight.on = flight.on();
      stats.flight.ring = flight.stats();
      stats.flight.bytes = flight.bytes();
      stats.flight.incidents = incidents.stats();
      std::vector<Metric> published = SelfMetrics(stats);
      if (gpus) {
        // The last 10 s of readings: a scrape every 15 s or so sees each second once or twice.
        const auto& processes = session.registry().processes();
        PodOf pod_of = [&processes](pid_t pid) -> const PodInfo* {
          auto it = processes.find(pid);
          return it == processes.end() || it->second->exited ? nullptr : &it->second->pod;
        };
        std::vector<Metric> g =
            GpuMetrics(gpus->Recent(static_cast<uint64_t>(std::max<int64_t>(0, now - 10'000'000'000))), gpus->Missing(),
                       cfg.node, pod_of, static_cast<double>(gpus->cpu_ns()) / 1e9, gpus->reads());
        published.insert(published.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
      }
      if (util) {
        std::vector<Metric> u = util_metrics.Metrics(cfg.node);
        published.insert(published.end(), std::make_move_iterator(u.begin()), std::make_move_iterator(u.end()));
      }
      metrics.Publish(std::move(published));
      last_metrics = now;
    }
  }
  trace_requests.Close();  // a request waiting now is answered, not left to time out
  // The last, partial window goes out too, with what the libraries still
  // held (up to a flush period of kernel records), and what is still open
  // of an out-of-memory episode.
  const Session::LibraryFlush last_flush = session.FlushLibraries();
  session.OpenGatesAndDrain();
  session.events().oom().FinishAll();
  PushOomCaptures(cfg, session, exporter);
  nccl.CollectEnded(session);  // hangs the last events ended go out with their stacks
  snapshots.OnHangsEnded(nccl.TakeEnded());
  CloseWindow(session, snapshots, exporter, rank_totals, window_start_wall, NowNs(CLOCK_MONOTONIC) - window_start);
  exporter.Finish();                                   // every window is in the push queue from here
  if (util) session.events().SetUtilization(nullptr);  // it goes before the session
  // With a spool, what Pyroscope cannot take now waits on disk: no need to
  // hold the node's shutdown for it.
  exporters::PushQueue& queue = (*delivery)->queue();
  bool flushed = queue.Flush(cfg.spool_dir.empty() ? 10000 : 2000);
  exporters::PushStats st = queue.Stats();
  (*delivery)->Stop();  // undelivered requests move to the spool
  // One line with every count, structured: what a DaemonSet's last words
  // are read for (did everything get out, and if not, where is it).
  const uint64_t processes = snapshots.processes_reported();
  std::vector<logging::Field> fields = {{"events", session.events().stats().records},
                                        {"processes", processes},
                                        {"libraries_flushed", last_flush.answered},
                                        {"libraries_unanswered", last_flush.unanswered},
                                        {"pushes_accepted", st.pushed},
                                        {"retried", st.failed_attempts},
                                        {"dropped_queue_full", st.dropped_queue_full},
                                        {"rejected", st.dropped_rejected},
                                        {"given_up", st.dropped_undeliverable},
                                        {"given_up_profiles", st.series_undeliverable},
                                        {"lost_writing_spool", st.dropped_spool_write}};
  if (!flushed) {
    fields.emplace_back("not_delivered", st.queued + st.spooled);
    fields.emplace_back("last_error", st.last_error);
    if (!cfg.spool_dir.empty()) fields.emplace_back("kept_in", cfg.spool_dir);
  }
  logging::Log(flushed ? logging::Level::kInfo : logging::Level::kWarning,
               absl::StrCat("agent stopped: ", session.events().stats().records, " events from ", processes,
                            processes == 1 ? " process" : " processes"),
               fields);
  logging::Flush();
  session.DetachProbesInBackground();
  return 0;
}

}  // namespace gpuflame::profiler
