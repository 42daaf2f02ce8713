#include "profiler/pipeline/session.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <signal.h>

#include <cerrno>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"
#include "profiler/probes/preflight.h"
#include "profiler/process/guardian.h"
#include "profiler/process/run_control.h"

namespace gpuflame::profiler {

absl::StatusOr<std::unique_ptr<Session>> Session::Start(const Options& options) {
  if (auto s = CheckPrivileges(options.system_wide && options.profiling.gate_new_libraries); !s.ok()) return s;
  if (auto s = CheckKernel(); !s.ok()) return s;
  std::unique_ptr<Session> s(new Session(options.profiling.guardrails));
  s->native_ = std::make_unique<symbolizer::NativeSymbolizer>(s->elves_);
  s->symbol_keep_ns_ = std::max<int64_t>(options.symbol_keep_ns, 0);

  // Before the programs load, so that their first runs are counted too.
  s->program_stats_ = ProgramStats::Enable();
  BpfProbes::Options bopt;
  bopt.filter_targets = !options.system_wide;
  bopt.ring_bytes = options.profiling.ring_buffer_kb << 10;
  bopt.native_stacks = static_cast<int>(options.profiling.native_stacks);
  bopt.gate_new_files = options.system_wide && options.profiling.gate_new_libraries;
  const bool per_process = options.per_process_probes && !options.system_wide;
  bopt.follow_forks = per_process;
  // The launch route's uprobes go at each window's close, which another
  // gpuflame's asking may bring about (ProcessRegistry::Options::launch_route).
  bopt.reap_in_background = true;
  // Every synchronise call's record where utilization or the timeline takes
  // them; else only NCCL processes', for their GPU-side hangs.
  bopt.sync_returns_all = options.profiling.sync_waits;
  bopt.io_spans = options.profiling.io_spans;
  // Sampled: a process's start-up stays exact (0 would sample from its first
  // allocation; the rodata's 0 means "never", hence at least 1 ns).
  if (!options.profiling.tensor_exact)
    bopt.tensor_sample_after_ns = std::max<uint64_t>(options.profiling.tensor_startup_s * 1'000'000'000, 1);
  bopt.share_held_map = ShareHeldMapWithGuardian;  // what the gates stop, for a guardian that outlives us
  auto probes = BpfProbes::Load(bopt);
  if (!probes.ok()) return ExplainBpfFailure(probes.status());
  s->probes_ = std::move(*probes);
  // Reading starts now: what the lifecycle hooks see while the rest is set
  // up (a machine-wide scan can take a while) waits in the queue.
  RingReader::Options qopt;
  qopt.queue_bytes = options.queue_bytes;
  auto reader = s->probes_->StartRingReader(qopt);
  if (!reader.ok()) return reader.status();
  s->reader_ = std::move(*reader);

  ProcessRegistry::Options ropt;
  ropt.filtered = !options.system_wide;
  ropt.tensor_events = options.profiling.tensor_events;
  ropt.kernel_time_exact = options.profiling.kernel_time_exact;
  ropt.tensor_exact = options.profiling.tensor_exact;
  ropt.sync_waits = options.profiling.sync_waits || options.profiling.nccl_gpu_hangs;
  ropt.api_spans = options.profiling.api_spans;
  ropt.launch_route = options.profiling.launch_uprobes;
  ropt.target_flags = GF_TARGET_TRACE | GF_TARGET_FOLLOW;
  ropt.per_process_probes = per_process;
  s->registry_ = std::make_unique<ProcessRegistry>(*s->probes_, s->elves_, ropt, s->native_.get());
  s->resolver_ = std::make_unique<StackResolver>(
      s->registry_.get(), *s->native_,
      StackResolver::Options{options.profiling.show_trampolines, options.profiling.keep_interpreter_frames});
  s->unwinder_ = std::make_unique<NativeUnwinder>(*s->native_);
  s->events_ = std::make_unique<EventProcessor>(s->registry_.get(), *s->resolver_, s->unwinder_.get());
  s->events_->SetLossCollector([raw = s.get()] { raw->CollectLosses(); });
  // An out-of-memory capture says what the GPU has: read from the driver
  // while the process is still there, when its episode opens.
  s->events_->oom().SetContext([raw = s.get()](pid_t pid) {
    OomProcessContext c = raw->events_->OomContext(pid);
    c.device = raw->oom_memory_.Read(pid);
    return c;
  });
  s->refresher_ = std::make_unique<FrameRefresher>(options.profiling.binary_dirs);
  if (const ProfilingOptions& p = options.profiling; p.cpu_hz > 0) {
    s->events_->SetCpuSampling(1'000'000'000 / p.cpu_hz, p.thread_names);
    if (auto st = s->probes_->StartCpuSampling(p.cpu_hz); !st.ok())
      return absl::Status(st.code(), absl::StrCat("CPU profile: ", st.message(), " (use --cpu-hz 0 to go without)"));
  }
  if (options.system_wide) {
    s->registry_->ScanAll();
    // Every process found is late: what the driver says they hold already.
    std::vector<pid_t> late;
    for (const auto& [pid, info] : s->registry_->processes())
      if (info->attached_late) late.push_back(pid);
    s->driver_held_.OnAttached(late, *s->events_, [raw = s.get()] { raw->Drain(); });
  }
  return s;
}

Session::~Session() {
  // The reader first: it must not be left pushing while the rest goes.
  if (reader_) reader_->Stop();
}

absl::Status Session::AddTarget(pid_t pid) {
  if (auto s = registry_->AddTarget(pid); !s.ok()) return s;
  if (const ProcessInfo* info = registry_->Find(pid); info && info->attached_late) {
    const pid_t late[] = {pid};
    driver_held_.OnAttached(late, *events_, [this] { Drain(); });
  }
  return absl::OkStatus();
}

std::vector<std::string> Session::TakeWarnings() {
  std::vector<std::string> out = registry_->TakeWarnings();
  for (std::string& w : driver_held_.TakeWarnings()) out.push_back(std::move(w));
  return out;
}

void Session::AccountBeforeAttach() {
  auto exited = [this](pid_t pid) {
    const ProcessInfo* info = registry_->Find(pid);
    return !info || info->exited;
  };
  driver_held_.Refresh(*events_, exited, [this] { Drain(); });  // drains: first
  events_->AccountAllocatedBeforeAttach();
}

absl::Status Session::AddGatedChild(pid_t pid) {
  return probes_->SetTarget(pid, GF_TARGET_TRACE | GF_TARGET_GATE | GF_TARGET_FOLLOW);
}

const base::Heartbeat& Session::reader_heartbeat() const { return reader_->heartbeat(); }

int Session::Poll(int timeout_ms) {
  worker_heartbeat_.Beat();
  int n = reader_->Poll(timeout_ms, [this](std::span<const uint8_t> record) { events_->OnRecord(record); });
  const int64_t now = NowNs(CLOCK_MONOTONIC);
  events_->oom().Tick(static_cast<uint64_t>(now));  // out-of-memory episodes whose time is up
  if (now >= next_loss_check_ns_) {
    next_loss_check_ns_ = now + 50'000'000;
    CollectLosses();
    if (now >= next_exit_sweep_ns_) {
      next_exit_sweep_ns_ = now + 2'000'000'000;
      SweepExited(now);
      events_->ExpireLaunchHits(static_cast<uint64_t>(now));
    }
    if (now >= next_symbol_sweep_ns_) {
      // As often as the keep time asks, down to the exit sweep's 2 s.
      next_symbol_sweep_ns_ = now + std::clamp<int64_t>(symbol_keep_ns_, 2'000'000'000, kSymbolSweepNs);
      SweepSymbols(now);
    }
  }
  registry_->Tick([this] { Drain(); });
  CheckGuardrails();
  return n;
}

void Session::CheckGuardrails() {
  const int64_t now = NowNs(CLOCK_MONOTONIC);
  if (now < next_guardrail_check_ns_) return;
  next_guardrail_check_ns_ = now + 1'000'000'000;
  const uint32_t before = guardrails_.actions();
  // gpuflame's time in the profiled processes, read only when budgeted: a
  // syscall per program and a /proc read per process, once a second. The
  // machine-wide lifecycle programs are the node's cost, not theirs.
  uint64_t bpf_ns = 0, workload_ns = 0;
  if (guardrails_.limits().max_overhead > 0 && program_stats_.available()) {
    bpf_ns = InProcessRunTimeNs(BpfProgramStats());
    // And the injection library's own time in them (its hook, callbacks
    // and threads), as it reports it.
    bpf_ns += events_->library_cost().ns();
    workload_ns = registry_->SampleFollowedCpuNs();
  }
  const uint32_t now_shed = guardrails_.Check(now, bpf_ns, workload_ns);
  // Every check, not only on a change: a library file whose site could not
  // be attached is tried again (nothing to do for the others).
  registry_->SetThrift(ThriftLevel(now_shed));
  if (now_shed == before) return;
  probes_->SetShed(now_shed & kShedInBpf);
  events_->SetFrozen(now_shed & kFreezeStacks);
}

void Session::OpenGatesAndDrain() {
  probes_->OpenGates();
  // A program that read the flag just before it was set emits within
  // microseconds: its record is in the ring when Drain looks.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Drain();
}

Session::LibraryFlush Session::FlushLibraries(int64_t limit_ns) {
  LibraryFlush out;
  const int64_t start = NowNs(CLOCK_MONOTONIC);  // BPF's clock: an answer from before the ask is another's
  ProcessRegistry::LibraryFlushAsk ask = registry_->AskLibraryFlush();
  out.asked = static_cast<uint32_t>(ask.asked.size());
  out.without_probe = ask.without_probe;
  out.forked = ask.forked;
  out.failed = ask.failed;
  auto answered = [&](pid_t pid) {
    const ProcessInfo* info = registry_->Find(pid);
    return info && info->library_flushed_ns >= static_cast<uint64_t>(start);
  };
  // Or gone: its exit's flush is in the ring before its end.
  auto gone = [&](pid_t pid) {
    const ProcessInfo* info = registry_->Find(pid);
    return !info || info->exited || (kill(pid, 0) != 0 && errno == ESRCH);
  };
  // The library looks every 100 ms; its flush is CUPTI's to take.
  std::vector<pid_t> waiting = ask.asked;
  while (!waiting.empty() && NowNs(CLOCK_MONOTONIC) - start < limit_ns) {
    if (int n = Poll(10); n < 0 && n != -EINTR) break;
    std::erase_if(waiting, [&](pid_t pid) { return answered(pid) || gone(pid); });
  }
  registry_->EndLibraryFlush(ask);  // every tick flushes while it is held
  Drain();
  for (pid_t pid : ask.asked) {
    if (answered(pid)) out.answered++;
    else if (gone(pid)) out.exited++;
    else out.unanswered++;
  }
  out.wait_ns = NowNs(CLOCK_MONOTONIC) - start;
  return out;
}

void Session::Drain() {
  reader_->Drain([this](std::span<const uint8_t> record) { events_->OnRecord(record); });
  CollectLosses();
}

std::vector<StackId> Session::RetireProcesses(std::span<const pid_t> pids) {
  std::vector<StackId> stacks = events_->RetireProcesses(pids);
  for (pid_t pid : pids) {
    probes_->ForgetLosses(pid);
    registry_->Forget(pid);
  }
  return stacks;
}

void Session::SweepExited(int64_t now) {
  // Followed processes, and those the registry never heard of (their
  // library-mapped record lost) that hold allocations all the same.
  auto is_gone = [](pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; };
  std::vector<pid_t> gone;
  for (const auto& [pid, info] : registry_->processes())
    if (!info->exited && is_gone(pid)) gone.push_back(pid);
  for (pid_t pid : events_->tracker().PidsWithLiveAllocations()) {
    const ProcessInfo* info = registry_->Find(pid);
    if ((!info || info->exited) && is_gone(pid)) gone.push_back(pid);
  }
  if (gone.empty()) return;
  Drain();  // its last records, if any, come before its end
  for (pid_t pid : gone)
    if (const ProcessInfo* info = registry_->Find(pid); !info || !info->exited)
      events_->OnProcessGone(pid, static_cast<uint64_t>(now));
    else events_->ForgetLiveAllocations(pid);  // records that came after its exit
}

void Session::SweepSymbols(int64_t now) {
  absl::flat_hash_map<pid_t, bool> verdicts;  // one kill(0) per process
  auto alive = [&](pid_t pid) {
    auto [it, inserted] = verdicts.try_emplace(pid, true);
    if (inserted) it->second = registry_->Find(pid) != nullptr || kill(pid, 0) == 0 || errno != ESRCH;
    return it->second;
  };
  // The unwinder first: its processes hold the CFI tables.
  const size_t tables = unwinder_->Sweep(now, symbol_keep_ns_, alive);
  const size_t files = native_->Sweep(now, symbol_keep_ns_, alive);
  // One PyTorch process's tables are hundreds of MB (321 MiB on an H100
  // host, session 44), and glibc keeps what is freed in its arenas: handed
  // back, the pod's memory limit and the budget see it go.
  if (tables + files > 0) malloc_trim(0);
}

Session::SymbolFiles Session::symbol_files() const {
  SymbolFiles out;
  out.files = elves_.size();
  out.file_bytes = elves_.MemoryUsage();
  out.dwarf_files = native_->dwarf_files();
  out.unwind_tables = unwinder_->cfi().size();
  out.unwind_bytes = unwinder_->cfi().MemoryUsage();
  out.files_evicted = elves_.evicted();
  out.unwind_tables_evicted = unwinder_->cfi().evicted();
  return out;
}

void Session::CollectLosses() {
  // Two syscalls when nothing was lost (an empty map's first key). Bounded
  // per call: a flood is taken over several calls, the rest waits in the
  // maps (the LRU map keeps the newest).
  events_->OnLosses(probes_->ReadLosses(16384));
  events_->OnLostEvents(probes_->TakeLostEvents(65536));
}

void Session::DetachProbesInBackground() {
  if (probes_) probes_->CloseUprobeMultiLinks();
  // The child reads |alive| until EOF, which comes when the last write end
  // closes. Close-on-exec, so no command we might still start holds it open.
  std::optional<base::Pipe> alive = base::Pipe::Open();
  if (!alive) return;
  pid_t pid = fork();
  if (pid == 0) {
    // Owners are not destroyed here (_exit), so each close is explicit.
    base::ScopedFd null(open("/dev/null", O_RDWR | O_CLOEXEC));
    for (int fd = 0; fd < 3; fd++) dup2(null.get(), fd);  // the copies are not close-on-exec
    alive->write_end.reset();                             // else our own copy would keep EOF from coming
    char b;
    while (read(alive->read_end.get(), &b, 1) < 0 && errno == EINTR) {
    }
    _exit(0);  // read returns 0 once the parent has exited
  }
  alive->read_end.reset();
  // The write end is deliberately never closed: it is released from its
  // owner and left open until gpuflame exits, when the kernel closes it and
  // the child's read returns, so the child drops the inherited BPF
  // descriptors (and pays the per-probe detach) only after we are gone.
  // Closing it here would let the child exit at once, leaving the last
  // references (and the slow detach) to our own exit again. On a failed
  // fork there is no child, and the owner closes it.
  if (pid > 0) (void)alive->write_end.release();
}

}  // namespace gpuflame::profiler
