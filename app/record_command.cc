#include "app/record_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "app/record_nccl.h"
#include "app/record_oom.h"
#include "app/record_output.h"
#include "app/record_timeline.h"
#include "app/record_utilization.h"
#include "base/json_string.h"
#include "base/open_file_limit.h"
#include "base/scoped_fd.h"
#include "exporters/files/html_writer.h"
#include "inspect/bounded_read.h"
#include "logging/log.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/forensics/growth.h"
#include "profiler/forensics/growth_report.h"
#include "profiler/forensics/stack_names.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/pipeline/session.h"
#include "profiler/probes/preflight.h"
#include "profiler/process/guardian.h"
#include "profiler/process/process_registry.h"
#include "profiler/process/run_control.h"
#include "profiler/resolve/stack_resolver.h"

namespace gpuflame::profiler {
namespace {

int Fail(const absl::Status& s) {
  logging::Error(s.message());
  return 2;
}

// Starts |argv| stopped before exec, so it can be made a target first.
struct Child {
  pid_t pid = -1;
  // Write a byte to let it exec. Closing it without a byte (an error return
  // before the release, or our exit) makes the child exit 127 unrun.
  base::ScopedFd release;
  // The errno of a failed exec, written by the child before it exits 127;
  // close-on-exec, so a command that ran closes it unwritten. Read once the
  // child has exited: it tells "could not run" from a command's own 127.
  base::ScopedFd exec_error;
};

// Why |child| (exited 127) could not be run, from its exec_error pipe; 0 if
// it did run (the 127 was the command's own).
int ExecErrno(Child& child) {
  if (!child.exec_error) return 0;
  int err = 0;
  const ssize_t n = read(child.exec_error.get(), &err, sizeof(err));
  child.exec_error.reset();
  return n == static_cast<ssize_t>(sizeof(err)) ? err : 0;
}

// libgpuflame_cupti.so shipped with this binary: next to it (build tree,
// container image) or in ../lib/gpuflame (installed).
std::string FindCuptiLibrary() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const char* rel :
       {"libgpuflame_cupti.so", "cupti/libgpuflame_cupti.so", "../lib/gpuflame/libgpuflame_cupti.so"}) {
    std::filesystem::path p = self.parent_path() / rel;
    if (std::filesystem::is_regular_file(p, ec)) return std::filesystem::canonical(p, ec).string();
  }
  return "";
}

absl::StatusOr<Child> SpawnHeld(const std::vector<std::string>& argv, const std::string& injection, bool kernel_time,
                                bool every_launch, bool sync_waits) {
  std::optional<base::Pipe> gate = base::Pipe::Open();  // close-on-exec: the command never sees it
  if (!gate) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  std::optional<base::Pipe> exec_error = base::Pipe::Open();
  if (!exec_error) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Our copy of the write end must go (owners are not destroyed here:
    // exec or _exit), or the read below could never see EOF if gpuflame died.
    gate->write_end.reset();
    exec_error->read_end.reset();
    char b;
    if (read(gate->read_end.get(), &b, 1) != 1) _exit(127);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    signal(SIGINT, SIG_DFL);
    base::RestoreOpenFileLimit();  // the command's own, not gpuflame's raised one
    // Kernel time without touching the workload: CUDA loads the injection
    // library at cuInit. A user's own injection setting wins.
    if (!injection.empty()) setenv("CUDA_INJECTION64_PATH", injection.c_str(), /*overwrite=*/0);
    // Loaded for in-process tensor events only: it leaves CUPTI alone.
    if (!injection.empty() && !kernel_time) setenv("GPUFLAME_KERNEL_TIME", "0", /*overwrite=*/1);
    // --timeline-every-launch-stack: every launch's stack (the library
    // otherwise samples them: cupti/launch_sampler.h).
    if (every_launch) setenv("GPUFLAME_LAUNCH_STACKS_PER_S", "0", /*overwrite=*/1);  // asked for by name
    // --sync-waits: the default kinds (cupti/activity_tuning.h) and CUPTI's
    // synchronisation records. A user's own list wins.
    if (sync_waits) setenv("GPUFLAME_CUPTI_KINDS", "kernel,memcpy,memset,sync", /*overwrite=*/0);
    execvp(args[0], args.data());
    const int err = errno;
    (void)!write(exec_error->write_end.get(), &err, sizeof(err));
    _exit(127);  // reported by the parent, with the errno above
  }
  // The read end of the gate and the write end of exec_error close here.
  return Child{pid, std::move(gate->write_end), std::move(exec_error->read_end)};
}

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}
  void Draw(double elapsed, const EventProcessor& ev, size_t procs) {
    if (!enabled_) return;
    int64_t gpu = 0, torch = 0;
    const auto& counters = ev.tracker().counters();
    for (StackId id = 0; id < counters.size() && id < ev.stacks().size(); id++) {
      (ev.stacks().Get(id).domain == GF_DOMAIN_TORCH ? torch : gpu) += counters[id].inuse_bytes;
    }
    std::fprintf(stderr, "\r\033[K[gpuflame] %6.1fs  %llu events  GPU in use %s  tensors %s  %zu process%s", elapsed,
                 static_cast<unsigned long long>(ev.stats().records), HumanBytes(gpu).c_str(),
                 HumanBytes(torch).c_str(), procs, procs == 1 ? "" : "es");
    drawn_ = true;
  }
  void Finish() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
  }
  // Before a log line: the line drawn is wiped, and drawn again later.
  void Clear() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

// summary.json's gpu_kernels.launch_route: how the launch route's hits and
// records met, and its windows; where we asked for it (--launch-stacks
// uprobes) or followed another gpuflame's asking (|asked| says which), else
// empty.
std::string LaunchRouteJson(const ProcessRegistry& reg, const EventProcessor& ev) {
  const LaunchRouteStats& r = ev.launch_route().stats();
  const LaunchRouteSiteStats& w = reg.launch_route().stats();
  const bool asked = reg.options().launch_route;
  // Not its records alone: the library's priming sends a tick's worth to
  // every listener of its launch records, whether or not a window follows.
  if (!asked && w.windows + w.windows_unserved + r.hits == 0) return "";
  return absl::StrCat(
      ", \"launch_route\": {\"asked\": ", asked ? "true" : "false", ", \"hits\": ", r.hits,
      ", \"records\": ", r.records, ", \"joined\": ", r.joined, ", \"records_without_hit\": ", r.records_without_hit,
      ", \"hits_without_record\": ", r.hits_expired + r.hits_passed, ", \"hits_dropped\": ", r.hits_dropped,
      ", \"hits_held\": ", ev.launch_route().held(), ", \"api_mismatches\": ", r.api_mismatches,
      ", \"late_launches\": ", ev.stats().launches_late,
      ", \"records_unconverted\": ", ev.stats().launch_records_unconverted, ", \"windows\": ", w.windows,
      ", \"windows_unserved\": ", w.windows_unserved, ", \"windows_expired\": ", w.windows_expired,
      ", \"windows_partial\": ", w.windows_partial,
      ", \"attach_ms\": ", absl::StrFormat("%.3f", static_cast<double>(w.attach_ns) / 1e6),
      ", \"attach_max_ms\": ", absl::StrFormat("%.3f", static_cast<double>(w.attach_max_ns) / 1e6), "}");
}

std::string SummaryJson(const EventProcessor& ev, const ProcessRegistry& reg,
                        const std::array<uint64_t, GF_STAT_MAX>& bpf, const RingReaderStats& reader,
                        const StackResolver& res, const UnwindStats& unwind, const symbolizer::NativeSymbolizer& native,
                        const Session::SymbolFiles& files, const Guardrails& guard, const std::string& self_cost,
                        const ProfilingOptions& profiling, const std::string& oom, const std::string& growth,
                        const std::string& timeline, const std::string& utilization, const std::string& nccl,
                        const Session::LibraryFlush& flush, double seconds, const std::vector<std::string>& warnings) {
  const char* bpf_names[GF_STAT_MAX] = {"events",
                                        "ringbuf_full_drops",
                                        "return_without_entry",
                                        "out_param_unreadable",
                                        "failed_cuda_calls",
                                        "python_walks",
                                        "python_no_thread_state",
                                        "python_read_failed",
                                        "python_truncated",
                                        "driver_calls_inside_runtime_calls",
                                        "gated_stops",
                                        "cpu_samples",
                                        "kernel_launches_sampled",
                                        "gpu_activity_records",
                                        "gpu_activity_batches_unreadable",
                                        "shed_native_stacks",
                                        "shed_cpu_samples",
                                        "shed_tensor_events",
                                        "tensor_batches",
                                        "tensor_batches_unreadable",
                                        "backward_calls",
                                        "backward_calls_untracked",
                                        "backward_caller_stacks_lent",
                                        "native_stacks_skipped_ring_pressure",
                                        "gates_not_applied_held_map_full",
                                        "stacks_sent_as_ids",
                                        "stacks_sent_with_ids",
                                        "nccl_calls",
                                        "nccl_nested_calls",
                                        "nccl_unique_ids_unreadable",
                                        "cuda_sync_calls",
                                        "cuda_sync_nested_calls",
                                        "threads_ended_inside_calls",
                                        "cuda_sync_entries_sent",
                                        "thread_ended_records",
                                        "io_spans",
                                        "io_small_reads_not_sent",
                                        "io_over_per_process_cap",
                                        "api_call_records",
                                        "api_batches_unreadable",
                                        "tensor_allocations_not_sampled",
                                        "launch_route_hits",
                                        "launch_route_records",
                                        "launch_route_batches_unreadable"};
  static_assert(GF_STAT_MAX == 44, "name every BPF counter");
  std::string out = absl::StrFormat("{\n  \"duration_seconds\": %.3f,\n  \"bpf\": {", seconds);
  for (int i = 0; i < GF_STAT_MAX; i++) absl::StrAppend(&out, i ? ", " : "", "\"", bpf_names[i], "\": ", bpf[i]);
  // The ring-buffer reader thread: records moved to the worker, times it
  // waited on a full hand-off queue, records it dropped (larger than the queue).
  absl::StrAppend(&out, "},\n  \"reader\": {\"records\": ", reader.records,
                  ", \"queue_full_waits\": ", reader.full_waits, ", \"dropped\": ", reader.dropped);
  const TrackerStats& t = ev.tracker().stats();
  absl::StrAppend(
      &out, "},\n  \"events\": {\"records\": ", ev.stats().records, ", \"malformed\": ", ev.stats().malformed,
      ", \"allocs\": ", t.allocs, ", \"frees\": ", t.frees, ", \"unmatched_frees\": ", t.unmatched_frees,
      ", \"unsampled_frees\": ", t.unsampled_frees, ", \"sampled_allocs\": ", t.sampled_allocs,
      ", \"replaced_live\": ", t.replaced_live, ", \"shutdown_frees\": ", t.shutdown_frees,
      // Lost in the ring but kept by BPF without a stack, applied to the live set.
      ", \"lost_allocs_kept\": ", t.lost_allocs, ", \"lost_frees_kept\": ", t.lost_frees,
      ", \"lost_frees_forgotten\": ", t.lost_frees_forgotten, ", \"exits_inferred\": ", ev.stats().exits_inferred,
      // Python stacks sent as IDs (gpuflame_abi.h, struct gf_stack_id), and those
      // naming frames not kept (charged to [stack not received]).
      ", \"stack_id_records\": ", ev.stats().stack_id_records, ", \"stack_id_unknown\": ", ev.stats().stack_id_unknown,
      ", \"live_allocations\": ", ev.tracker().live_count(), ", \"cu_mem_map_calls\": ", ev.stats().map_calls,
      ", \"cu_mem_mapped_bytes\": ", ev.stats().mapped_bytes, ", \"cpu_samples\": ", ev.stats().cpu_samples,
      ", \"sync_calls\": ", ev.stats().sync_calls, ", \"sync_calls_unused\": ", ev.stats().sync_calls_unused, "},\n");
  // Where tensor events came from; those of libgpuflame_cupti.so's in-process hook.
  absl::StrAppend(&out, "  \"tensor_events\": \"", TensorEventsName(profiling.tensor_events), "\",\n");
  // Exact, or sampled by bytes: in-process by the library's own interval
  // (each process's tensor_sample_bytes), through the probes by
  // GF_PROBE_TENSOR_SAMPLE_BYTES from tensor_startup_s after a process's
  // first tensor on (bpf/lib/tensor_sampling.bpf.h).
  absl::StrAppend(&out, "  \"tensor_sampling\": {\"mode\": \"", profiling.tensor_exact ? "exact" : "sampled", "\"");
  if (!profiling.tensor_exact)
    absl::StrAppend(&out, ", \"probe_sample_bytes\": ", GF_PROBE_TENSOR_SAMPLE_BYTES,
                    ", \"probe_startup_s\": ", profiling.tensor_startup_s);
  absl::StrAppend(&out, "},\n");
  absl::StrAppend(&out, "  \"inprocess\": {\"events\": ", ev.stats().inprocess_events,
                  ", \"stacks\": ", ev.stats().inprocess_stacks,
                  ", \"events_with_unknown_stack\": ", ev.stats().inprocess_unknown_stacks,
                  ", \"probe_events_superseded\": ", ev.stats().bpf_tensor_events_superseded,
                  // Autograd's engine threads' work, charged to the backward() caller's stack
                  // (or, with several calls running at once, to the ambiguous marker).
                  ", \"autograd_events\": ", ev.stats().autograd_events,
                  ", \"autograd_events_ambiguous\": ", ev.stats().autograd_events_ambiguous,
                  ", \"autograd_launches\": ", ev.stats().autograd_launches,
                  ", \"autograd_launches_ambiguous\": ", ev.stats().autograd_launches_ambiguous,
                  ", \"autograd_unknown_origins\": ", ev.stats().autograd_unknown_origins, "},\n");
  // The same found by BPF (the probes' path, and every CPU sample), per record kind.
  const ProcessorStats& st = ev.stats();
  absl::StrAppend(&out, "  \"backward_callers_lent\": {\"allocations\": ", st.lent_allocations,
                  ", \"allocations_ambiguous\": ", st.lent_allocations_ambiguous, ", \"launches\": ", st.lent_launches,
                  ", \"launches_ambiguous\": ", st.lent_launches_ambiguous, ", \"cpu_samples\": ", st.lent_cpu_samples,
                  ", \"cpu_samples_ambiguous\": ", st.lent_cpu_samples_ambiguous, "},\n");
  // Processes held until probes were attached: record's own command and its
  // children at each mapping, exec and fork (without exec), or,
  // machine-wide, the first mapper of each new library file.
  const ProcessRegistry::GateStats gates = reg.gate_stats();
  absl::StrAppend(&out, "  \"gates\": {\"held\": ", gates.count,
                  ", \"p50_ms\": ", absl::StrFormat("%.3f", static_cast<double>(gates.p50_ns) / 1e6),
                  ", \"p99_ms\": ", absl::StrFormat("%.3f", static_cast<double>(gates.p99_ns) / 1e6),
                  ", \"max_ms\": ", absl::StrFormat("%.3f", static_cast<double>(gates.max_ns) / 1e6),
                  ", \"slowest_file\": ", base::JsonString(gates.slowest_file), "},\n");
  // gpuflame's own budget: the limits, the last reading, what is shed now,
  // and how many events went to the over-budget stack.
  const GuardrailLimits& lim = guard.limits();
  absl::StrAppend(
      &out, "  \"guardrails\": {\"max_cpu_cores\": ", lim.max_cpu_cores, ", \"max_overhead\": ", lim.max_overhead,
      ", \"overhead\": ", absl::StrFormat("%.4f", guard.last_usage().overhead),
      ", \"max_rss_bytes\": ", lim.max_rss_bytes,
      ", \"cpu_cores\": ", absl::StrFormat("%.3f", guard.last_usage().cpu_cores),
      ", \"rss_bytes\": ", guard.last_usage().rss_bytes,
      ", \"shedding\": ", base::JsonString(DescribeShed(guard.actions())),
      ", \"thrift_level\": ", ThriftLevel(guard.actions()),
      ", \"thrift_processes_short\": ", reg.thrift().files_short(), ", \"changes\": ", guard.changes().size(),
      ", \"over_budget_events\": ", ev.stats().over_budget_events, "},\n");
  // gpuflame's own cost: its BPF programs' run time in the profiled processes, its CPU time.
  absl::StrAppend(&out, "  \"self_cost\": ", self_cost, ",\n");
  const JoinStats& j = ev.joiner().stats();
  absl::StrAppend(&out, "  \"gpu_kernels\": {\"launch_stacks\": ", j.launches, ", \"activity_records\": ", j.records,
                  ", \"joined\": ", j.joined, ", \"charged_by_sampled_share\": ", j.scaled,
                  ", \"launch_stack_not_sampled\": ", j.unattributed, ", \"unknown_kernel_names\": ", j.unknown_names,
                  ", \"expired_launch_stacks\": ", j.expired_launches,
                  ", \"implausible_durations_clamped\": ", j.implausible_durations,
                  ", \"weighted_records\": ", j.weighted_records, ", \"estimated_records\": ", j.estimated_records,
                  ", \"activity\": \"", reg.options().kernel_time_exact ? "exact" : "sampled", "\"",
                  LaunchRouteJson(reg, ev), "},\n");
  // The recording's end: the libraries of processes that ran on, asked for
  // what they held (Session::FlushLibraries).
  absl::StrAppend(&out, "  \"library_flush\": {\"asked\": ", flush.asked, ", \"answered\": ", flush.answered,
                  ", \"exited\": ", flush.exited, ", \"unanswered\": ", flush.unanswered,
                  ", \"without_probe\": ", flush.without_probe, ", \"forked\": ", flush.forked,
                  ", \"failed\": ", flush.failed, ", \"wait_ms\": ", flush.wait_ns / 1'000'000, "},\n");
  absl::StrAppend(&out, "  \"symbols\": {\"stacks\": ", ev.stacks().size(), ", \"frames\": ", ev.frames().size(),
                  ", \"python_frames_unresolved\": ", res.stats().python_unresolved,
                  ", \"truncated_stacks\": ", res.stats().truncated, ", \"mixed_stacks\": ", res.stats().mixed,
                  ", \"cpu_python_frames_unresolved\": ", res.stats().cpu_python_unresolved,
                  ", \"python_frames_reused_before_read\": ", res.stats().python_reused,
                  ", \"native_frames_unresolved\": ", native.unresolved(),
                  ", \"inlined_frames\": ", native.inlined_frames(), ", \"unwinds\": ", unwind.unwinds,
                  ", \"unwinds_from_cached_cfi\": ", unwind.fast, ", \"unwinds_by_libdwfl\": ", unwind.fallback,
                  ", \"unwinds_redone_after_new_mappings\": ", unwind.relisted, ", \"library_files\": ", files.files,
                  ", \"library_files_released\": ", files.files_evicted, ", \"unwind_tables\": ", files.unwind_tables,
                  ", \"unwind_tables_released\": ", files.unwind_tables_evicted, "},\n");
  // Reads of the targets' memory that could have waited on a file (bounded_read.h).
  const inspect::BoundedReadStats reads = inspect::ReadStats();
  absl::StrAppend(&out, "  \"target_reads\": {\"through_worker\": ", reads.worker_reads,
                  ", \"overran\": ", reads.overran, ", \"refused\": ", reads.refused,
                  ", \"stuck_workers\": ", reads.stuck_workers, "},\n  \"processes\": [");
  bool first = true;
  for (const auto& [pid, info] : reg.processes()) {
    absl::StrAppend(
        &out, first ? "\n" : ",\n", "    {\"pid\": ", pid, ", \"process\": ", base::JsonString(info->comm),
        ", \"python\": ",
        info->python ? base::JsonString(absl::StrCat(info->python->version.major, ".", info->python->version.minor))
                     : "null",
        ", \"cuda\": ", info->has_cuda ? "true" : "false", ", \"torch\": ", info->has_torch ? "true" : "false");
    if (info->has_torch && info->tensor_inprocess)
      absl::StrAppend(&out, ", \"tensor_events\": \"", *info->tensor_inprocess ? "inprocess" : "probes", "\"");
    if (info->tensor_hook)
      absl::StrAppend(&out, ", \"tensor_hook\": ", info->tensor_hook,
                      ", \"tensor_hook_python\": ", info->tensor_hook_python,
                      ", \"tensor_sample_bytes\": ", info->tensor_sample_bytes);
    if (info->autograd_hook) {
      static constexpr const char* kStates[] = {"", "live", "not found", "other signature", "patch failed"};
      absl::StrAppend(&out, ", \"autograd_hook\": \"",
                      info->autograd_hook < std::size(kStates) ? kStates[info->autograd_hook] : "unknown", "\"");
    }
    // The high-water marks of in use, whose live sets are the peak_* sample types.
    const PeakSummary gpu_peak = ev.tracker().Peak(pid, GF_DOMAIN_GPU, PeakScope::kAllTime);
    const PeakSummary torch_peak = ev.tracker().Peak(pid, GF_DOMAIN_TORCH, PeakScope::kAllTime);
    absl::StrAppend(&out, ", \"peak_bytes\": {\"gpu_memory\": ", gpu_peak.bytes,
                    ", \"torch_memory\": ", torch_peak.bytes, "}");
    // The caching allocator's slack by address arithmetic (segment_slack.h):
    // device segments, the tensor bytes in them, and tensors in none.
    const SlackTotals slack = ev.tracker().Slack(pid);
    absl::StrAppend(&out, ", \"slack\": {\"segments\": ", slack.segments,
                    ", \"reserved_bytes\": ", slack.reserved_bytes, ", \"tensor_bytes\": ", slack.tensor_bytes,
                    ", \"unused_bytes\": ", slack.unused_bytes,
                    ", \"blocks_in_no_known_segment\": ", slack.unknown_blocks,
                    ", \"bytes_in_no_known_segment\": ", slack.unknown_bytes, "}");
    if (auto it = ev.allocator_totals().find(static_cast<uint32_t>(pid));
        it != ev.allocator_totals().end() && it->second.known)
      absl::StrAppend(&out, ", \"torch_allocated_bytes\": ", it->second.allocated,
                      ", \"torch_reserved_bytes\": ", it->second.reserved);
    // What the ring buffer had no room for: under [lost: ring buffer full] in its profiles.
    if (auto it = ev.losses().find(static_cast<uint32_t>(pid)); it != ev.losses().end()) {
      const ProcessLoss& l = it->second;
      absl::StrAppend(&out, ", \"lost\": {\"records\": ", l.records, ", \"allocations\": ", l.allocs,
                      ", \"allocation_bytes\": ", l.alloc_bytes, ", \"frees\": ", l.frees,
                      ", \"cpu_samples\": ", l.cpu_samples, ", \"launches\": ", l.launches, ", \"other\": ", l.other,
                      "}");
    }
    out += "}";
    first = false;
  }
  // Out-of-memory episodes and what was captured of each (profiler/forensics/).
  absl::StrAppend(&out, "\n  ],\n  \"oom\": ", oom, ",\n");
  // Stacks whose in use grew in most intervals of the run (profiler/forensics/growth.h).
  absl::StrAppend(&out, "  \"growth\": ", growth, ",\n");
  // record --timeline: its file, what went in, what the limits left out (null: off).
  absl::StrAppend(&out, "  \"timeline\": ", timeline, ",\n");
  // Why the GPU idled, per process's GPU (null: no kernel time).
  absl::StrAppend(&out, "  \"utilization\": ", utilization, ",\n");
  // Every NCCL call: totals per operation, communicators, hangs (profiler/collectives/).
  absl::StrAppend(&out, "  \"nccl\": ", nccl, ",\n  \"warnings\": [");
  for (size_t i = 0; i < warnings.size(); i++) absl::StrAppend(&out, i ? ", " : "", base::JsonString(warnings[i]));
  out += "]\n}\n";
  return out;
}

// The page's table of growing stacks, as summary.json names them.
std::vector<exporters::GrowthRow> GrowthRows(const GrowthTracker& growth, const std::vector<GrowingStack>& growing,
                                             StackSource source) {
  std::vector<exporters::GrowthRow> rows;
  const uint64_t start = growth.boundary_times().empty() ? 0 : growth.boundary_times().front();
  for (const GrowingStack& g : growing)
    rows.push_back({g.pid, GrowthLevelName(g.domain), FoldedStack(source.stacks.Get(g.stack).frames, source.frames),
                    ShortStack(source.stacks.Get(g.stack).frames, source.frames), g.growth_bytes,
                    static_cast<int64_t>(g.intervals_grown), static_cast<int64_t>(g.intervals), g.first_inuse,
                    g.last_inuse, static_cast<double>(g.since_ns - start) / 1e9});
  return rows;
}

}  // namespace

// Native tensor stacks come only from the probes; otherwise each process
// is decided by the registry (auto: in-process where it loads our library,
// as record's own command does unless it brings its own injection).
TensorEvents ResolveTensorEvents(const RecordOptions& opt) {
  if (opt.profiling.native_stacks == NativeStacks::kAll && opt.profiling.tensor_events == TensorEvents::kAuto)
    return TensorEvents::kProbes;
  return opt.profiling.tensor_events;
}

int RunRecord(const RecordOptions& opt) {
  logging::Options log = opt.log;
  if (opt.quiet) log.level = std::max(log.level, logging::Level::kError);
  logging::Configure(log);
  // Most fundamental first: without privileges nothing else matters. The
  // command is always held at its gates; machine-wide, new processes unless
  // --no-gate.
  const bool holds = !opt.command.empty() || (opt.pids.empty() && opt.profiling.gate_new_libraries);
  if (auto s = CheckPrivileges(holds); !s.ok()) return Fail(s);
  for (pid_t pid : opt.pids)
    if (kill(pid, 0) != 0 && errno == ESRCH) return Fail(absl::NotFoundError(absl::StrCat("no such process: ", pid)));
  std::error_code exists_ec;
  const bool dir_existed = std::filesystem::exists(opt.output_dir, exists_ec);
  if (auto s = PrepareOutputDir(opt.output_dir); !s.ok()) return Fail(s);

  // Before any thread: if we are killed while holding our command stopped
  // at a gate, it resumes it.
  Guardian guardian = Guardian::Start();
  bool system_wide = opt.pids.empty() && opt.command.empty();
  const std::string library = opt.command.empty() ? "" : FindCuptiLibrary();
  ProfilingOptions profiling = opt.profiling;
  profiling.tensor_events = ResolveTensorEvents(opt);
  // Synchronise waits go to the utilization, which needs kernel time, and
  // to the timeline as spans of their own.
  profiling.sync_waits = profiling.kernel_time || opt.timeline.on;
  // Model-loading I/O: the timeline's alone.
  profiling.io_spans.on = opt.timeline.on && opt.timeline.io;
  profiling.api_spans = opt.timeline.on;
  profiling.io_spans.min_bytes = opt.timeline.io_min_bytes;
  profiling.io_spans.min_us = opt.timeline.io_min_us;
  profiling.io_spans.max_per_process = opt.timeline.io_max_per_process;
  Session::Options sopt;
  sopt.system_wide = system_wide;
  sopt.per_process_probes = opt.per_process_probes;
  sopt.profiling = profiling;
  auto started = Session::Start(sopt);
  if (!started.ok()) return Fail(started.status());
  Session& session = **started;
  // Attached before the first record, so the trace starts with the run.
  RecordTimeline timeline(opt.timeline, session.events());
  RecordUtilization utilization(profiling.kernel_time, opt.utilization, session.events());
  RecordNccl nccl(opt.quiet, opt.nccl_hang_s);
  nccl.Start(session);
  for (pid_t pid : opt.pids)
    if (auto s = session.AddTarget(pid); !s.ok()) return Fail(s);

  // With a command, Ctrl-C reaches it through the terminal; we finish when it exits.
  InstallStopHandlers(/*sigint=*/opt.command.empty());

  std::vector<std::string> warnings;  // every one said, for summary.json
  Child child;
  if (!opt.command.empty()) {
    std::string injection = profiling.NeedsInjection() ? library : "";
    auto c = SpawnHeld(opt.command, injection, profiling.kernel_time, opt.timeline.every_launch_stack,
                       opt.utilization.sync_waits);
    if (!c.ok()) return Fail(c.status());
    child = std::move(*c);
    ForwardStopSignalsTo(child.pid);
    // Gate our own command (and its children): stopped at exec and at every
    // CUDA/PyTorch/libpython mapping until the probes are in place.
    RememberTarget(child.pid);
    if (auto s = session.AddGatedChild(child.pid); !s.ok()) return Fail(s);
    (void)!write(child.release.get(), "x", 1);
    child.release.reset();
  }

  if (!opt.quiet) {
    std::string what = !opt.command.empty() ? opt.command[0]
                       : system_wide        ? std::string("every CUDA process")
                                            : absl::StrCat(opt.pids.size(), " process(es)");
    logging::Info(absl::StrCat("recording ", what, " (Ctrl-C to stop)"));
  }
  const int64_t start_wall = NowNs(CLOCK_REALTIME);
  const int64_t start = NowNs(CLOCK_MONOTONIC);
  Progress progress(opt.progress && !opt.quiet);
  RecordOom oom(opt.quiet);
  // Each stack's in use at interval boundaries, for the stacks that keep growing.
  GrowthTracker growth;
  int exit_status = 0;
  int exec_errno = 0;                           // the command could not be run: nothing to write
  const bool child_done = opt.command.empty();  // no command: nothing to wait for
  int64_t last_draw = 0;
  while (!StopRequested()) {
    // Returns as soon as the reader thread hands records over (it reads the
    // ring every 20 ms, at once for lifecycle records); the timeout only
    // paces the checks below when nothing comes.
    int n = session.Poll(20);
    if (n < 0 && n != -EINTR) {
      logging::Error(absl::StrCat("reading events failed: ", std::strerror(-n)));
      break;
    }
    for (std::string& w : session.TakeWarnings()) {
      progress.Clear();
      logging::Warning(w);
      warnings.push_back(std::move(w));  // for summary.json too
    }
    if (const int sig = TakeForwardedSignal()) {
      progress.Clear();
      logging::Info(absl::StrCat("passed SIG", sigabbrev_np(sig), " on to ", opt.command[0],
                                 "; the profiles are written when it exits"));
    }
    oom.Collect(session);  // each out-of-memory capture said as it ends
    int64_t now = NowNs(CLOCK_MONOTONIC);
    nccl.Tick(session, static_cast<uint64_t>(now));  // each NCCL hang said while stuck, and when over
    growth.Tick(static_cast<uint64_t>(now), session.events().tracker().counters(), session.events().stacks());
    double elapsed = static_cast<double>(now - start) / 1e9;
    if (now - last_draw > 200'000'000) {
      progress.Draw(elapsed, session.events(), session.registry().processes().size());
      last_draw = now;
    }
    if (!child_done) {
      int status = 0;
      pid_t r = waitpid(child.pid, &status, WNOHANG);
      if (r == child.pid) {  // the loop ends here: no need to mark the child done
        exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (exit_status == 127) exec_errno = ExecErrno(child);
        break;
      }
    }
    if (opt.duration_s && elapsed >= *opt.duration_s) break;
    if (!opt.pids.empty()) {
      bool any = false;
      for (pid_t pid : opt.pids) any |= kill(pid, 0) == 0 || errno != ESRCH;
      if (!any) break;
    }
  }
  if (exec_errno) {
    // Nothing ran: no profile (an empty one would read as "it allocated
    // nothing"), and no directory if this run made it. A shell's status.
    progress.Finish();
    logging::Error(absl::StrCat("could not run ", opt.command[0], ": ", std::strerror(exec_errno)));
    if (!dir_existed) rmdir(opt.output_dir.c_str());  // only if still empty
    session.DetachProbesInBackground();
    return 127;
  }
  // What the processes that run on still hold in their libraries (up to a
  // flush period of kernel records) comes before the end.
  const Session::LibraryFlush library_flush = session.FlushLibraries();
  for (std::string& w : session.TakeWarnings()) {
    progress.Clear();
    logging::Warning(w);
    warnings.push_back(std::move(w));
  }
  if (library_flush.unanswered) {
    std::string w = absl::StrCat(library_flush.unanswered, " process(es) did not hand over their last records within ",
                                 Session::kLibraryFlushLimitNs / 1'000'000'000,
                                 " s: kernel time of the recording's last second may be missing from them");
    progress.Clear();
    logging::Warning(w);
    warnings.push_back(std::move(w));
  }
  session.OpenGatesAndDrain();
  oom.Finish(session);
  nccl.Finish(session, static_cast<uint64_t>(NowNs(CLOCK_MONOTONIC)));
  // The last boundary: in use as the recording ends (every record handled),
  // before record --pid's reading of what was held from before is charged.
  growth.TakeBoundary(static_cast<uint64_t>(NowNs(CLOCK_MONOTONIC)), session.events().tracker().counters(),
                      session.events().stacks());
  session.RefreshFrames();
  progress.Finish();
  const int64_t duration = NowNs(CLOCK_MONOTONIC) - start;

  absl::flat_hash_map<pid_t, std::string> comm;
  bool any_torch = false;
  session.AccountBeforeAttach();  // record --pid: what they held already
  const EventProcessor& events = session.events();
  ProcessRegistry& registry = session.registry();
  for (const auto& [pid, info] : registry.processes()) {
    comm[pid] = info->comm;
    any_torch |= info->has_torch;
  }
  for (StackId id = 0; id < events.stacks().size(); id++)
    any_torch |= events.stacks().Get(id).domain == GF_DOMAIN_TORCH;
  // peak_*: each process's live set when its in use was highest.
  const std::vector<StackCounters> counters = events.tracker().CountersWithPeaks(PeakScope::kAllTime);
  profiler::Profile gpu =
      BuildMemoryProfile(events.stack_source(), counters, GF_DOMAIN_GPU, comm, std::nullopt, start_wall, duration);
  profiler::Profile torch =
      BuildMemoryProfile(events.stack_source(), counters, GF_DOMAIN_TORCH, comm, std::nullopt, start_wall, duration);
  for (auto [profile, domain] : {std::pair{&gpu, uint8_t{GF_DOMAIN_GPU}}, std::pair{&torch, uint8_t{GF_DOMAIN_TORCH}}})
    for (const auto& [pid, info] : registry.processes())
      if (const PeakSummary peak = events.tracker().Peak(pid, domain, PeakScope::kAllTime); peak.bytes > 0)
        profile->comments.push_back(absl::StrCat("gpuflame: pid ", pid, ": ", DescribePeak(peak, PeakScope::kAllTime)));
  session.events().joiner().Flush(NowNs(CLOCK_MONOTONIC), /*everything=*/true);  // pooled unsampled kernels
  profiler::Profile cpu =
      BuildTimeProfile(events.stack_source(), events.cpu(), events.cpu_period_ns(), events.cpu().totals(),
                       TimeKind::kCpu, comm, std::nullopt, start_wall, duration);
  profiler::Profile kernels =
      BuildTimeProfile(events.stack_source(), events.kernels(), events.cpu_period_ns(), events.kernels().totals(),
                       TimeKind::kGpuKernel, comm, std::nullopt, start_wall, duration);
  bool any_cupti = false;
  // The library also serves tensor events: kernel time only when asked for.
  for (const auto& [pid, info] : registry.processes()) any_cupti |= info->has_cupti && opt.profiling.kernel_time;
  // A process found running whose device memory from before could not be
  // read (no NVML): its gpu_memory in use is partial, and says so.
  if (!session.driver_unavailable().empty()) gpu.comments.push_back(session.driver_unavailable());
  std::vector<const profiler::Profile*> profiles{&gpu};
  if (any_torch) profiles.push_back(&torch);
  if (opt.profiling.cpu_hz > 0) profiles.push_back(&cpu);
  if (any_cupti || !kernels.samples.empty()) profiles.push_back(&kernels);
  utilization.Finish();
  const std::optional<profiler::Profile> idle = utilization.IdleProfile(comm, start_wall, duration);
  if (idle) profiles.push_back(&*idle);
  const std::vector<profiler::Profile> oom_profiles = oom.Profiles(session);
  for (const profiler::Profile& p : oom_profiles) profiles.push_back(&p);
  const std::optional<profiler::Profile> nccl_profile = nccl.BuildProfile(session, comm, start_wall, duration);
  if (nccl_profile) profiles.push_back(&*nccl_profile);
  if (opt.profiling.kernel_time)
    registry.CheckKernelTime(
        [&](pid_t pid) { return events.tracker().Peak(pid, GF_DOMAIN_GPU, PeakScope::kAllTime).bytes > 0; });

  const size_t said_live = warnings.size();  // already on the terminal
  for (std::string& w : session.TakeWarnings()) warnings.push_back(std::move(w));
  auto bpf_stats = session.BpfStats();
  if (bpf_stats[GF_STAT_RINGBUF_FULL]) {
    // Charged to each process's "[lost: ring buffer full]" frame: allocations
    // with their bytes (in use exact where BPF kept them), CPU samples.
    uint64_t allocs = 0, bytes = 0, frees = 0, samples = 0;
    for (const auto& [pid, l] : session.events().losses()) {
      allocs += l.allocs;
      bytes += l.alloc_bytes;
      frees += l.frees;
      samples += l.cpu_samples;
    }
    const profiler::TrackerStats& t = session.events().tracker().stats();
    // BPF keeps each lost allocation and free in an LRU map; what it evicted
    // before we read it is only counted, and in use is off by it; so is a
    // kept free forgotten while it waited for its allocation.
    const uint64_t unkept = (allocs > t.lost_allocs ? allocs - t.lost_allocs : 0) +
                            (frees > t.lost_frees ? frees - t.lost_frees : 0) + t.lost_frees_forgotten;
    warnings.push_back(absl::StrFormat(
        "%d records were lost because the ring buffer was full (a larger --ring-buffer-kb holds more): "
        "%d allocations (%s), %d frees, %d CPU samples are under \"%s\" in the profiles; %s",
        bpf_stats[GF_STAT_RINGBUF_FULL], allocs, HumanBytes(static_cast<int64_t>(bytes)), frees, samples,
        profiler::kLostFrame,
        unkept
            ? absl::StrCat(unkept, " of the lost allocations and frees could not be kept: in-use bytes are not exact")
            : "in-use bytes are exact (BPF kept every lost allocation and free)"));
  }
  if (bpf_stats[GF_STAT_PRESSURE_NATIVE_STACKS])
    warnings.push_back(absl::StrCat(bpf_stats[GF_STAT_PRESSURE_NATIVE_STACKS],
                                    " device-level events went without native frames (Python frames only): the "
                                    "ring buffer was over half full"));
  const RingReaderStats reader_stats = session.ReaderStats();
  if (reader_stats.dropped)
    warnings.push_back(
        absl::StrCat(reader_stats.dropped, " events were dropped by the ring-buffer reader (larger than its queue)"));
  if (registry.processes().empty())
    warnings.push_back("no process with a CUDA library was seen: the profiles are empty");
  else {
    bool cuda = false;
    for (const auto& [pid, info] : registry.processes()) cuda |= info->has_cuda || info->has_torch;
    if (!cuda) warnings.push_back("no CUDA library was loaded by the profiled processes");
  }
  // What gpuflame shed to stay in its budget: said on the terminal, in the
  // summary, and in every profile, where the numbers are read.
  for (const std::string& line : session.guardrails().Describe(start)) {
    for (profiler::Profile* p : {&gpu, &torch, &cpu, &kernels}) p->comments.push_back(line);
    warnings.push_back(line);
  }
  if (events.stats().over_budget_events)
    warnings.push_back(absl::StrCat(events.stats().over_budget_events,
                                    " events on stacks first seen while over the memory budget went to ",
                                    kOverBudgetFrame));
  // Processes that ended are judged before their teardown (growth.h).
  const std::vector<GrowingStack> growing = growth.Growing([&](pid_t pid) {
    const ProcessInfo* info = registry.Find(pid);
    return (info && info->exited) || (kill(pid, 0) != 0 && errno == ESRCH);
  });
  const std::vector<std::string> growth_lines = GrowthLines(growth, growing, events.stack_source());
  const SelfCost self_cost{session.program_stats().Describe(), ProgramCostBetween({}, session.BpfProgramStats()),
                           session.guardrails().CpuSeconds(), events.library_cost()};
  std::string title = opt.command.empty() ? "record" : opt.command[0];
  for (size_t i = 1; i < opt.command.size() && i < 4; i++) absl::StrAppend(&title, " ", opt.command[i]);
  // Every record is in and every frame named: the trace can be written.
  const std::array<uint64_t, GF_STAT_MAX> bpf_now = session.BpfStats();
  const std::string io_json = IoSpansJson(session.IoSpansAttached(), profiling.io_spans, bpf_now[GF_STAT_IO_SPANS],
                                          bpf_now[GF_STAT_IO_SMALL], bpf_now[GF_STAT_IO_OVER_CAP]);
  if (auto s = timeline.Finish(comm, title, io_json); !s.ok()) return Fail(s);
  if (std::optional<std::string> w = timeline.Warning()) warnings.push_back(std::move(*w));
  const std::string utilization_json = utilization.SummaryJson(comm);
  std::string summary =
      SummaryJson(events, registry, bpf_stats, reader_stats, session.resolver(), session.unwinder().stats(),
                  session.native_symbols(), session.symbol_files(), session.guardrails(), SelfCostJson(self_cost),
                  profiling, oom.Json(session), GrowthJson(growth, growing, events.stack_source(), comm),
                  timeline.SummaryJson(), utilization_json, nccl.Json(session, comm, static_cast<uint64_t>(start)),
                  library_flush, static_cast<double>(duration) / 1e9, warnings);
  // The page's notes: each out-of-memory capture, then each NCCL hang.
  std::vector<std::string> notes = oom.Lines(session);
  for (std::string& line : nccl.HangLines(session)) notes.push_back(std::move(line));
  auto written =
      WriteRecordOutput(opt.output_dir, profiles, title, summary, notes,
                        GrowthRows(growth, growing, events.stack_source()), timeline.Files(), utilization_json);
  if (!written.ok()) return Fail(written.status());

  if (!opt.quiet) {
    for (size_t i = said_live; i < warnings.size(); i++) logging::Warning(warnings[i]);
    const TrackerStats& t = events.tracker().stats();
    int64_t kernel_ns = 0, kernels_run = 0;
    for (const auto& [key, c] : events.kernels().totals()) {
      kernel_ns += c.nanos;
      kernels_run += c.count;
    }
    std::string kernel_part = kernels_run ? absl::StrFormat(", %.1f ms of GPU work in %d kernels/copies",
                                                            static_cast<double>(kernel_ns) / 1e6, kernels_run)
                                          : "";
    std::fprintf(stderr, "gpuflame: %llu allocations, %llu frees, %llu CPU samples%s in %.1fs; wrote %s/\n",
                 static_cast<unsigned long long>(t.allocs), static_cast<unsigned long long>(t.frees),
                 static_cast<unsigned long long>(events.stats().cpu_samples), kernel_part.c_str(),
                 static_cast<double>(duration) / 1e9, opt.output_dir.c_str());
    std::fprintf(stderr, "%s\n", SelfCostLine(self_cost).c_str());
    std::fprintf(stderr, "gpuflame: open %s/flamegraph.html in a browser\n", opt.output_dir.c_str());
    if (opt.timeline.on) std::fprintf(stderr, "gpuflame: %s\n", timeline.Line(opt.output_dir).c_str());
    for (const std::string& line : utilization.Lines(comm))
      std::fprintf(stderr, "%s%s\n", line.starts_with("  ") ? "" : "gpuflame: ", line.c_str());
    const std::vector<std::string> nccl_lines = nccl.Lines(session);
    for (size_t i = 0; i < nccl_lines.size(); i++)  // a heading, then its indented lines
      std::fprintf(stderr, "%s%s\n", i ? "" : "gpuflame: ", nccl_lines[i].c_str());
    for (size_t i = 0; i < growth_lines.size(); i++)  // a heading, then its indented lines
      std::fprintf(stderr, "%s%s\n", i ? "" : "gpuflame: ", growth_lines[i].c_str());
  }
  logging::Flush();
  session.DetachProbesInBackground();
  return opt.command.empty() ? 0 : exit_status;
}

}  // namespace gpuflame::profiler
