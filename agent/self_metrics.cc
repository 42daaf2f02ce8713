#include "agent/self_metrics.h"

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/pipeline/guardrails.h"

namespace gpuflame::profiler {

AgentStats CollectAgentStats(Session& session, double window_snapshot_seconds, const ExportStats& exported,
                             const exporters::PushStats& push) {
  AgentStats s;
  s.bpf = session.BpfStats();
  s.reader = session.ReaderStats();
  const EventProcessor& ev = session.events();
  s.events = ev.stats();
  s.tracker = ev.tracker().stats();
  s.live_allocations = ev.tracker().live_count();
  s.stacks = ev.stacks().size() - ev.stacks().free_ids();
  s.frames = ev.frames().size();
  s.processes = session.registry().processes().size();
  s.joiner = ev.joiner().stats();
  s.launch_route = ev.launch_route().stats();
  s.launch_route_held = ev.launch_route().held();
  s.launch_windows = session.registry().launch_route().stats();
  s.events_library = ev.library_cost();
  s.resolver = session.resolver().stats();
  s.unwinder = session.unwinder().stats();
  s.symbol_files = session.symbol_files();
  s.refresher = session.refresher().stats();
  s.native_frames_unresolved = ev.frames().unresolved().size();
  for (const auto& [pid, info] : session.registry().processes()) s.processes_attached += !info->exited;
  s.library_files_attached = session.registry().attached_files();
  s.gates = session.registry().gate_stats();
  s.window_snapshot_seconds = window_snapshot_seconds;
  s.self_usage = session.guardrails().last_usage();
  s.shedding = session.guardrails().actions();
  s.thrift_files_short = session.registry().thrift().files_short();
  s.self_cpu_seconds = session.guardrails().CpuSeconds();
  s.bpf_stats_on = session.program_stats().available();
  s.bpf_programs = session.BpfProgramStats();
  s.exported = exported;
  s.push = push;
  s.oom = ev.oom().stats();
  s.nccl = ev.nccl().stats();
  // The agent's tracker holds only hangs not yet over (NcclWatch): a few.
  for (const auto& [number, h] : ev.nccl().hangs())
    s.nccl_stuck[h.side == NcclHang::Side::kGpu] += h.outcome == NcclHang::Outcome::kStuck;
  return s;
}

void NcclRankTotals::Update(const NcclTracker& t, uint64_t now_ns) {
  for (const auto& [id, c] : t.stragglers().communicators())
    for (const auto& [r, w] : c.ranks)
      if (w.operations)
        ranks_[std::pair{id, r}] = {{NcclCommIdHex(id).substr(0, 16), r, w.held_ns, w.waited_ns, w.last}, now_ns};
  absl::erase_if(ranks_, [&](const auto& kv) { return now_ns - std::min(now_ns, kv.second.seen_ns) > kKeepNs; });
  if (ranks_.size() <= kMaxKept) return;
  // Past the bound (many short jobs within 10 minutes): the ranks retired
  // longest ago go first. Live ones (seen now) stay: the tracker bounds them.
  std::vector<std::pair<uint64_t, std::pair<NcclCommId, int>>> by_age;
  for (const auto& [key, k] : ranks_)
    if (k.seen_ns != now_ns) by_age.emplace_back(k.seen_ns, key);
  const size_t excess = std::min(ranks_.size() - kMaxKept, by_age.size());
  if (excess == 0) return;
  std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(excess - 1), by_age.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < excess; i++) ranks_.erase(by_age[i].second);
  dropped_ += excess;
}

void NcclRankTotals::Fill(AgentStats& s) const {
  s.nccl_ranks.clear();
  s.nccl_ranks.reserve(ranks_.size());
  for (const auto& [key, k] : ranks_) s.nccl_ranks.push_back(k.wait);
  // Bounded: a node runs a few ranks of a few communicators; past the bound
  // the ranks that held others up least go, counted.
  std::sort(s.nccl_ranks.begin(), s.nccl_ranks.end(), [](const auto& a, const auto& b) {
    return std::tie(b.held_ns, a.communicator, a.rank) < std::tie(a.held_ns, b.communicator, b.rank);
  });
  s.nccl_ranks_omitted = 0;
  if (s.nccl_ranks.size() > AgentStats::kMaxStragglerSeries) {
    s.nccl_ranks_omitted = s.nccl_ranks.size() - AgentStats::kMaxStragglerSeries;
    s.nccl_ranks.resize(AgentStats::kMaxStragglerSeries);
  }
  s.nccl_retired_ranks_dropped = dropped_;
}

namespace {

// Where a program runs (ProgramRunStats::machine_wide): the label that
// tells the node's cost from the profiled processes'.
const char* ProgramScope(const ProgramRunStats& p) { return p.machine_wide ? "node" : "profiled"; }

}  // namespace

std::vector<Metric> SelfMetrics(const AgentStats& s) {
  std::vector<Metric> out = {
      {"gpuflame_events_total", "Allocator events seen by the BPF programs.", "counter", double(s.bpf[GF_STAT_EVENTS])},
      {"gpuflame_ringbuf_dropped_total", "Events lost because the ring buffer was full.", "counter",
       double(s.bpf[GF_STAT_RINGBUF_FULL])},
      {"gpuflame_threads_ended_inside_calls_total",
       "Threads that ended inside a probed CUDA or NCCL call (killed mid-call, or pthread_exit): no return; where the "
       "process lives on, its NCCL or synchronise call ends there.",
       "counter", double(s.bpf[GF_STAT_CALLS_ENDED_WITH_THREAD])},
      {"gpuflame_records_total", "Ring-buffer records handled in user space.", "counter", double(s.events.records)},
      {"gpuflame_records_malformed_total", "Ring-buffer records that failed validation.", "counter",
       double(s.events.malformed)},
      {"gpuflame_processes_attached", "Processes being profiled.", "gauge", double(s.processes_attached)},
      {"gpuflame_gated_processes_total",
       "Processes held until probes were attached (the first mapper of each new library file).", "counter",
       double(s.gates.count)},
      {"gpuflame_gates_not_applied_total",
       "Processes not held at a gate because the kernel's table of held processes was full (GF_HELD_MAX): they ran on "
       "before their probes were in place.",
       "counter", double(s.bpf[GF_STAT_GATE_UNHELD])},
      {"gpuflame_gate_pause_p99_seconds", "How long the gate held a process, 99th percentile of the last 4096.",
       "gauge", double(s.gates.p99_ns) / 1e9},
      {"gpuflame_library_files_attached", "Library files (CUDA, PyTorch, libpython) with probes attached.", "gauge",
       double(s.library_files_attached)},
      {"gpuflame_live_allocations", "Allocations currently tracked.", "gauge", double(s.live_allocations)},
      {"gpuflame_stacks", "Distinct stacks held (those of exited processes are freed once reported).", "gauge",
       double(s.stacks)},
      {"gpuflame_frames", "Distinct frames held (shared by all processes).", "gauge", double(s.frames)},
      {"gpuflame_processes_known",
       "Processes the agent keeps state for, exited ones not yet reported for the last time included.", "gauge",
       double(s.processes)},
      {"gpuflame_sampled_tensor_allocations_total",
       "Tensor allocations taken by sampling by bytes, in-process or by the probes (each stands for more than itself).",
       "counter", double(s.tracker.sampled_allocs)},
      {"gpuflame_unmatched_frees_total", "Frees of memory allocated before gpuflame attached.", "counter",
       double(s.tracker.unmatched_frees)},
      {"gpuflame_unsampled_frees_total", "Frees, while the probes sampled allocations, of blocks not taken.", "counter",
       double(s.tracker.unsampled_frees)},
      {"gpuflame_lost_frees_forgotten_total",
       "Frees lost in the ring buffer and kept by BPF that waited for their allocation until a flood pushed them out: "
       "if it came later, it stays in use.",
       "counter", double(s.tracker.lost_frees_forgotten)},
      {"gpuflame_lost_records_total",
       "Records the ring buffer had no room for, charged to [lost: ring buffer full] in their process's profiles.",
       "counter", double(s.events.lost_records)},
      {"gpuflame_stack_id_records_total",
       "Records that sent a Python stack the process had sent before as its ID (the kernel interns stacks).", "counter",
       double(s.events.stack_id_records)},
      {"gpuflame_stack_id_unknown_total",
       "Records naming a stack ID whose frames were not kept, charged to [stack not received].", "counter",
       double(s.events.stack_id_unknown)},
      {"gpuflame_process_exits_inferred_total", "Followed processes found gone without their exit record.", "counter",
       double(s.events.exits_inferred)},
      {"gpuflame_python_frames_unresolved_total", "Python frames whose code object could not be read.", "counter",
       double(s.resolver.python_unresolved)},
      {"gpuflame_cpu_samples_total", "CPU-time samples taken in profiled processes.", "counter",
       double(s.bpf[GF_STAT_CPU_SAMPLES])},
      {"gpuflame_kernel_launch_stacks_total",
       "Kernel launches whose stack was taken (sampled by the injection library).", "counter",
       double(s.joiner.launches)},
      {"gpuflame_launch_route_hits_total",
       "Launch stacks taken by the launch route's uprobes on libcuda's launch functions (--launch-stacks uprobes).",
       "counter", double(s.launch_route.hits)},
      {"gpuflame_launch_route_records_total",
       "CUPTI's records of the calls the launch route's uprobes take stacks at, from the injection library.", "counter",
       double(s.launch_route.records)},
      {"gpuflame_launch_route_records_unconverted_total",
       "Records of those calls the injection library could not convert (no thread ID or clock pair): "
       "their stacks join nothing.",
       "counter", double(s.events.launch_records_unconverted)},
      {"gpuflame_launch_route_joined_total",
       "Launch route stacks that met CUPTI's record of their call, and so their kernels' correlation ID.", "counter",
       double(s.launch_route.joined)},
      {"gpuflame_launch_route_hits_held",
       "Launch route stacks waiting for their records now (each ends joined or unjoined: expired within about 7 s).",
       "gauge", double(s.launch_route_held)},
      {"gpuflame_launch_route_windows_total",
       "Launch windows in which the launch route's uprobes were attached to a process.", "counter",
       double(s.launch_windows.windows)},
      {"gpuflame_launch_route_windows_unserved_total",
       "Launch windows the launch route's uprobes could not be attached for (all, or some of the functions).",
       "counter", double(s.launch_windows.windows_unserved + s.launch_windows.windows_partial)},
      {"gpuflame_launch_route_windows_expired_total",
       "Launch windows the agent closed itself, the library's word of them having stopped.", "counter",
       double(s.launch_windows.windows_expired)},
      {"gpuflame_gpu_activity_records_total", "Kernel, memcpy and memset records from libgpuflame_cupti.so.", "counter",
       double(s.joiner.records)},
      {"gpuflame_gpu_activity_charged_by_share_total",
       "GPU activity whose launch stack was not sampled, charged to the sampled stacks of the same kernel.", "counter",
       double(s.joiner.scaled)},
      {"gpuflame_gpu_activity_unattributed_total",
       "GPU activity charged to [launch stack not sampled] (its kernel never had a sampled launch).", "counter",
       double(s.joiner.unattributed)},
      {"gpuflame_library_time_seconds_total",
       "libgpuflame_cupti.so's own time in the profiled processes (tensor hook, CUPTI callbacks, its threads), as the "
       "processes report it.",
       "counter", double(s.events_library.ns()) / 1e9},
      {"gpuflame_library_tensor_hook_seconds_total",
       "The in-process tensor hook's time (estimated from one event in 64).", "counter",
       double(s.events_library.hook_ns) / 1e9},
      {"gpuflame_library_tensor_hook_calls_total",
       "Allocator events the in-process tensor hook handled (taken or not).", "counter",
       double(s.events_library.hook_calls)},
      {"gpuflame_library_cupti_callback_seconds_total",
       "libgpuflame_cupti.so's CUPTI callbacks' time (estimated from one call in 64).", "counter",
       double(s.events_library.callback_ns) / 1e9},
      {"gpuflame_library_thread_seconds_total",
       "libgpuflame_cupti.so's own threads' CPU time (flusher, activity-buffer conversion).", "counter",
       double(s.events_library.thread_ns) / 1e9},
      {"gpuflame_gpu_activity_weighted_records_total",
       "Activity records of duty-cycled CUPTI activity, each standing for N (one period in N observed).", "counter",
       double(s.joiner.weighted_records)},
      {"gpuflame_gpu_activity_estimated_records_total",
       "What all activity records stand for: seen plus estimated unseen.", "counter",
       double(s.joiner.estimated_records)},
      {"gpuflame_gpu_activity_batches_unreadable_total", "Activity batches the probe could not copy (records lost).",
       "counter", double(s.bpf[GF_STAT_KERNEL_BATCH_READ_FAILED])},
      {"gpuflame_native_frames_unresolved", "Native frames still raw addresses (no symbol found yet).", "gauge",
       double(s.native_frames_unresolved)},
      {"gpuflame_native_frames_resolved_later_total",
       "Raw-address frames named in a later window (debug files or binaries found by build ID).", "counter",
       double(s.refresher.resolved)},
      {"gpuflame_unwinds_total", "Native stacks unwound from copied user stacks.", "counter",
       double(s.unwinder.unwinds)},
      {"gpuflame_unwinds_libdwfl_total", "Unwinds that needed libdwfl (rules outside the cached CFI subset).",
       "counter", double(s.unwinder.fallback)},
      {"gpuflame_symbol_files",
       "Library files whose symbol tables are held (kept a while after their last process; unreadable ones "
       "remembered as such included).",
       "gauge", double(s.symbol_files.files)},
      {"gpuflame_symbol_bytes",
       "Memory held by those symbol tables and by the unwind tables (DWARF readers not "
       "counted).",
       "gauge", double(s.symbol_files.file_bytes + s.symbol_files.unwind_bytes)},
      {"gpuflame_unwind_tables", "Unwind (CFI) tables held, one per library build.", "gauge",
       double(s.symbol_files.unwind_tables)},
      {"gpuflame_symbol_files_released_total",
       "Library files let go, no running process having used them for the keep time (unreadable ones included: "
       "tried again).",
       "counter", double(s.symbol_files.files_evicted)},
      {"gpuflame_unwind_tables_released_total",
       "Unwind tables let go, no running process having held them for the keep time (unreadable ones included).",
       "counter", double(s.symbol_files.unwind_tables_evicted)},
      {"gpuflame_profiles_enqueued_total", "Push requests queued (each holds several processes' window profiles).",
       "counter", double(s.exported.enqueued)},
      {"gpuflame_profiles_pushed_total", "Push requests accepted by Pyroscope.", "counter", double(s.push.pushed)},
      {"gpuflame_push_failures_total", "Push attempts that failed and were retried.", "counter",
       double(s.push.failed_attempts)},
      {"gpuflame_push_dropped_queue_full_total", "Push requests dropped because the queue was full.", "counter",
       double(s.push.dropped_queue_full)},
      {"gpuflame_push_rejected_total", "Push requests Pyroscope rejected for good.", "counter",
       double(s.push.dropped_rejected)},
      {"gpuflame_push_series_pushed_total", "Profiles (one series each) Pyroscope accepted.", "counter",
       double(s.push.series_pushed)},
      {"gpuflame_push_series_rejected_total",
       "Profiles Pyroscope rejected for good (the legacy /ingest API refuses them one by one).", "counter",
       double(s.push.series_rejected)},
      {"gpuflame_push_partial_attempts_total",
       "Failed push attempts that got part way (/ingest); what was taken is not sent again.", "counter",
       double(s.push.partial_attempts)},
      {"gpuflame_push_given_up_total", "Push requests given up: they kept failing while others got through.", "counter",
       double(s.push.dropped_undeliverable)},
      {"gpuflame_push_series_given_up_total", "Profiles in the push requests given up.", "counter",
       double(s.push.series_undeliverable)},
      {"gpuflame_spool_write_failures_total", "Push requests lost because the spool could not be written.", "counter",
       double(s.push.dropped_spool_write)},
      {"gpuflame_push_queue_requests", "Push requests waiting in memory.", "gauge", double(s.push.queued)},
      {"gpuflame_spool_requests", "Push requests waiting on disk.", "gauge", double(s.push.spooled)},
      {"gpuflame_spool_bytes", "Bytes of push requests waiting on disk.", "gauge", double(s.push.spool_bytes)},
      {"gpuflame_spool_dropped_total", "Spooled requests dropped because the spool was full.", "counter",
       double(s.push.dropped_spool_full)},
      {"gpuflame_spool_corrupt_total", "Spool files that could not be read back.", "counter",
       double(s.push.spool_corrupt)},
      {"gpuflame_profile_samples_folded_total", "Stacks folded into [other] to stay within Pyroscope's limits.",
       "counter", double(s.exported.folded_samples)},
      // The threads: ring-buffer reader -> event loop -> export thread.
      {"gpuflame_reader_queue_full_waits_total",
       "Times the ring-buffer reader thread waited because the event loop's queue was full (records then wait in the "
       "ring buffer).",
       "counter", double(s.reader.full_waits)},
      {"gpuflame_reader_dropped_total", "Ring-buffer records dropped by the reader thread (larger than its queue).",
       "counter", double(s.reader.dropped)},
      {"gpuflame_reader_queue_bytes", "Bytes of records waiting for the event loop.", "gauge",
       double(s.reader.queued_bytes)},
      {"gpuflame_window_snapshot_seconds",
       "Time the last window close held the event loop (building the per-process profiles).", "gauge",
       s.window_snapshot_seconds},
      {"gpuflame_window_export_seconds",
       "Time the export thread took for the last window (limits, encoding, labels, queueing).", "gauge",
       s.exported.last_window_seconds},
      {"gpuflame_export_dropped_total",
       "Per-process window profiles dropped because the export thread fell behind (oldest first).", "counter",
       double(s.exported.dropped)},
      {"gpuflame_profile_encode_failures_total", "Profiles that could not be serialised (not pushed).", "counter",
       double(s.exported.encode_failures)},
      // gpuflame's own budget (--max-cpu, --max-memory-mb) and what it sheds to keep it.
      {"gpuflame_self_cpu_cores", "gpuflame's own CPU use, in cores, over the last 10 s.", "gauge",
       s.self_usage.cpu_cores},
      {"gpuflame_overhead_ratio",
       "gpuflame's BPF time in the profiled processes per unit of their CPU time, over the last 10 s (-1: unknown); "
       "the machine-wide lifecycle programs are not in it.",
       "gauge", s.self_usage.overhead},
      {"gpuflame_self_resident_bytes", "gpuflame's own resident memory.", "gauge", double(s.self_usage.rss_bytes)},
      {"gpuflame_shedding",
       "Work shed to stay in budget, as bits: 1 native stacks, 2 CPU samples, 4 tensor events, 8 new stacks, 16 exact "
       "tensor events through the probes (sampled by bytes instead), 32/64/128 thrift levels 1-3.",
       "gauge", double(s.shedding)},
      {"gpuflame_thrift_level",
       "Thrift asked of libgpuflame_cupti.so by the overhead budget (0-3): its tensor hook's sampling interval is "
       "4^level times its own.",
       "gauge", double(ThriftLevel(s.shedding))},
      {"gpuflame_thrift_files_short",
       "libgpuflame_cupti.so files (record: processes) holding fewer thrift sites than the level asks: an attach "
       "failed, and their processes are thinned less.",
       "gauge", double(s.thrift_files_short)},
      {"gpuflame_shed_native_stacks_total", "Events whose native stack was not taken (over budget).", "counter",
       double(s.bpf[GF_STAT_SHED_NATIVE_STACKS])},
      {"gpuflame_native_stacks_skipped_total",
       "Native stack copies not taken because the ring buffer was over half full.", "counter",
       double(s.bpf[GF_STAT_PRESSURE_NATIVE_STACKS])},
      {"gpuflame_shed_cpu_samples_total", "CPU samples not taken (over budget).", "counter",
       double(s.bpf[GF_STAT_SHED_CPU_SAMPLES])},
      {"gpuflame_shed_tensor_events_total", "Caching-allocator events not taken (over budget).", "counter",
       double(s.bpf[GF_STAT_SHED_TENSOR_EVENTS])},
      {"gpuflame_tensor_allocations_not_sampled_total",
       "Caching-allocator allocations the probes did not take while sampling them by bytes (past a process's start-up, "
       "or over budget).",
       "counter", double(s.bpf[GF_STAT_TENSOR_NOT_SAMPLED])},
      {"gpuflame_over_budget_events_total", "Events on new stacks charged to [gpuflame over memory budget].", "counter",
       double(s.events.over_budget_events)},
      {"gpuflame_tensor_events_inprocess_total", "Tensor events from libgpuflame_cupti.so's in-process hook.",
       "counter", double(s.events.inprocess_events)},
      {"gpuflame_tensor_events_unknown_stack_total",
       "In-process tensor events whose stack never arrived ([stack not received]).", "counter",
       double(s.events.inprocess_unknown_stacks)},
      {"gpuflame_tensor_probe_events_superseded_total",
       "Probe tensor events dropped because the process's in-process hook serves it.", "counter",
       double(s.events.bpf_tensor_events_superseded)},
      // gpuflame's own cost: its CPU time, and its BPF programs' time, which
      // the kernel charges to the processes they run in.
      {"gpuflame_bpf_stats_enabled",
       "Whether the kernel's BPF run-time statistics are on (1), which the gpuflame_bpf_program_* series need.",
       "gauge", s.bpf_stats_on ? 1.0 : 0.0},
  };
  // Out-of-memory episodes: each captured one is pushed at once as a gpu_oom profile.
  out.push_back({"gpuflame_oom_episodes_total",
                 "Out-of-memory episodes: a device allocation that failed for want of memory, with the retries that "
                 "followed (or PyTorch's report of one).",
                 "counter", double(s.oom.episodes)});
  out.push_back({"gpuflame_oom_failed_calls_total",
                 "Device allocation calls that returned out of memory, retries included.", "counter",
                 double(s.oom.failed_calls)});
  out.push_back({"gpuflame_oom_not_captured_total",
                 "Out-of-memory episodes counted but not captured (over 8 per process, or too many at once).",
                 "counter", double(s.oom.not_captured)});
  for (const auto& [outcome, n] : {std::pair{"retry_succeeded", s.oom.retry_succeeded}, {"raised", s.oom.raised},
                                   {"process_exited", s.oom.exited}, {"unresolved", s.oom.unresolved}})
    out.push_back({"gpuflame_oom_captures_total",
                   "Out-of-memory episodes captured, by how they ended (each pushed at once as a gpu_oom profile where the agent's selectors take its process).", "counter",
                   double(n),
                   {{"outcome", outcome}}});
  // By why, so that a scrape tells a window's edges (records before the
  // uprobes were in, hits after the records went off) from a join that
  // failed (hits passed by a later record, entry points that differ).
  const LaunchRouteStats& r = s.launch_route;
  for (const auto& [reason, n] : {std::pair{"record_without_hit", r.records_without_hit - r.api_mismatches},
                                  {"record_of_another_entry_point", r.api_mismatches},
                                  {"hit_expired", r.hits_expired},
                                  {"hit_passed", r.hits_passed},
                                  {"hit_dropped", r.hits_dropped}})
    out.push_back({"gpuflame_launch_route_unjoined_total",
                   "Launch route stacks and records that did not meet, by reason: record_without_hit (the "
                   "uprobes not yet in: a window's start), record_of_another_entry_point (the hit before it "
                   "was another launch function's), hit_expired (its record never came: a window's end), "
                   "hit_passed (a later call's record came first), hit_dropped (over the bound).",
                   "counter",
                   double(n),
                   {{"reason", reason}}});
  out.push_back({"gpuflame_nccl_calls_total", "NCCL API calls seen (the outermost of each thread's nested ones).",
                 "counter", double(s.nccl.calls)});
  // side="call": the thread is stuck in the NCCL call; side="gpu": in a
  // synchronise call after its process's NCCL calls returned once enqueued
  // (how a peer that never joins shows on a GPU).
  for (const auto& [side, n] : {std::pair{"call", s.nccl.hangs - s.nccl.gpu_hangs}, {"gpu", s.nccl.gpu_hangs}})
    out.push_back({"gpuflame_nccl_hangs_total",
                   "NCCL hangs found: an NCCL call (side=call), or a synchronise call of a process that issued NCCL "
                   "calls (side=gpu), outstanding past nccl_hang_seconds (each logged with its stack and the ranks "
                   "it waits for).",
                   "counter",
                   double(n),
                   {{"side", side}}});
  for (const auto& [side, n] : {std::pair{"call", s.nccl_stuck[0]}, {"gpu", s.nccl_stuck[1]}})
    out.push_back({"gpuflame_nccl_calls_stuck",
                   "NCCL hangs stuck past nccl_hang_seconds now, by side (as gpuflame_nccl_hangs_total).",
                   "gauge",
                   double(n),
                   {{"side", side}}});
  out.push_back({"gpuflame_nccl_hangs_not_logged_total",
                 "NCCL hangs found while 1024 were stuck at once: counted, not logged.", "counter",
                 double(s.nccl.hangs_not_kept)});
  // Stragglers: per rank of the communicators this node runs, the rank
  // whose late entries held the others up (NcclStragglers), and each rank's
  // own waits. Labels: the communicator ID's first 16 hex digits and the
  // rank, as on the pushed nccl profiles (nccl_communicator, nccl_rank).
  // One family at a time: the exposition says each family's HELP and TYPE
  // once, its series together (interleaved, a scrape would fail on the
  // second HELP of one name).
  auto labels = [](const AgentStats::NcclRankWait& r) -> Metric::Labels {
    return {{"communicator", r.communicator}, {"rank", absl::StrCat(r.rank)}};
  };
  for (const AgentStats::NcclRankWait& r : s.nccl_ranks)
    out.push_back({"gpuflame_nccl_straggler_wait_seconds_total",
                   "Time the other ranks of a communicator seen on this node waited for this rank to enter a "
                   "collective it entered last (summed over them); what it was doing meanwhile is the pushed "
                   "nccl_straggler profile. A rank's series outlives its job by 10 minutes, unchanged.",
                   "counter", double(r.held_ns) / 1e9, labels(r)});
  for (const AgentStats::NcclRankWait& r : s.nccl_ranks)
    out.push_back({"gpuflame_nccl_rank_wait_seconds_total",
                   "Time this rank waited in collectives for the last rank to enter them.", "counter",
                   double(r.waited_ns) / 1e9, labels(r)});
  for (const AgentStats::NcclRankWait& r : s.nccl_ranks)
    out.push_back({"gpuflame_nccl_straggler_collectives_total",
                   "Collectives this rank entered last, 1 ms or more after the first rank.", "counter", double(r.last),
                   labels(r)});
  out.push_back({"gpuflame_nccl_straggler_retired_ranks_dropped_total",
                 "Ranks whose straggler totals were dropped before their 10 minutes after retirement (past 1024 "
                 "ranks kept).",
                 "counter", double(s.nccl_retired_ranks_dropped)});
  out.push_back({"gpuflame_nccl_straggler_ranks_omitted",
                 "Ranks left out of the straggler metrics (past 256, those that held others up least).", "gauge",
                 double(s.nccl_ranks_omitted)});
  if (s.flight.on) {
    const AgentStats::Flight& f = s.flight;
    out.push_back({"gpuflame_flight_recorder_events", "Timeline events the flight recorder holds now, all processes.",
                   "gauge", double(f.ring.events)});
    out.push_back({"gpuflame_flight_recorder_bytes",
                   "Memory of the flight recorder's buffers now (its bound: flight_recorder_max_mb).", "gauge",
                   double(f.bytes)});
    out.push_back({"gpuflame_flight_recorder_events_total", "Timeline events the flight recorder took.", "counter",
                   double(f.ring.pushed)});
    out.push_back({"gpuflame_flight_recorder_aged_out_total",
                   "Events that left the flight recorder older than its window (its purpose).", "counter",
                   double(f.ring.aged_out)});
    out.push_back({"gpuflame_flight_recorder_evicted_total",
                   "Events the flight recorder's memory bounds pushed out (or dropped) before they were older than "
                   "its window: missing from traces, which count them too.",
                   "counter", double(f.ring.evicted)});
    for (const auto& [trigger, n] :
         {std::pair{"request", f.requested}, std::pair{"oom", f.oom}, std::pair{"nccl_hang", f.nccl_hang}})
      out.push_back({"gpuflame_flight_recorder_traces_total",
                     "Traces written from the flight recorder, by what asked for them (GET /timeline, an "
                     "out-of-memory, an NCCL hang).",
                     "counter",
                     double(n),
                     {{"trigger", trigger}}});
    out.push_back({"gpuflame_flight_recorder_last_trace_seconds",
                   "How long writing the last trace held the event loop (its JSON: names need the pipeline's tables).",
                   "gauge", f.last_trace_seconds});
    out.push_back({"gpuflame_flight_recorder_requests_failed_total",
                   "GET /timeline requests the event loop answered with an error (no such process, ...).", "counter",
                   double(f.requests_failed)});
    out.push_back({"gpuflame_incident_traces_written_total", "Incident traces written to incident_trace_dir.",
                   "counter", double(f.incidents.written)});
    out.push_back({"gpuflame_incident_traces_lost_total",
                   "Incident traces not written: the write failed (logged), or the writer's queue was full.", "counter",
                   double(f.incidents.failed + f.incidents.dropped)});
    out.push_back({"gpuflame_incident_traces_removed_total",
                   "Older incident traces removed to keep incident_trace_dir within its bounds.", "counter",
                   double(f.incidents.removed)});
  }
  if (s.self_cpu_seconds >= 0)
    out.push_back({"gpuflame_self_cpu_seconds_total", "gpuflame's own CPU time, user and system, all its threads.",
                   "counter", s.self_cpu_seconds});
  // One family at a time: PrometheusText wants a family's series adjacent.
  for (const ProgramRunStats& p : s.bpf_programs)
    out.push_back({"gpuflame_bpf_program_runs_total",
                   "Runs of each gpuflame BPF program (kernel run-time stats, counted while they are on).",
                   "counter",
                   double(p.run_cnt),
                   {{"program", p.name}, {"scope", ProgramScope(p)}}});
  for (const ProgramRunStats& p : s.bpf_programs)
    out.push_back({"gpuflame_bpf_program_run_seconds_total",
                   "Time each gpuflame BPF program ran, charged by the kernel to the process it ran in; the uprobe "
                   "trap itself is not included. scope=\"node\": on kernel tracepoints, in every process of the node "
                   "(not counted in gpuflame_overhead_ratio).",
                   "counter",
                   double(p.run_time_ns) / 1e9,
                   {{"program", p.name}, {"scope", ProgramScope(p)}}});
  return out;
}

}  // namespace gpuflame::profiler
