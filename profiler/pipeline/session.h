// One profiling pipeline, two front ends (`record` and `agent`): BPF probes
// -> process registry -> event loop -> allocation tracker. Owns every piece
// and the order they are built and torn down in.
//
// Threads. Session starts one thread of its own, the ring-buffer reader
// (RingReader): it only copies records from the BPF ring buffer into a
// bounded queue. Everything else here belongs to the thread that calls
// Start, Poll and Drain (the worker, also called the event loop): records
// are decoded, unwound, resolved and counted there, and the registry
// attaches probes from there. Not thread-safe beyond that: one worker.
// The reader is stopped and joined by the destructor.
#ifndef GPUFLAME_PROFILER_PIPELINE_SESSION_H_
#define GPUFLAME_PROFILER_PIPELINE_SESSION_H_

#include <sys/types.h>

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/heartbeat.h"
#include "profiler/pipeline/driver_held.h"
#include "profiler/pipeline/event_processor.h"
#include "profiler/pipeline/guardrails.h"
#include "profiler/pipeline/oom_device_memory.h"
#include "profiler/pipeline/profiling_options.h"
#include "profiler/probes/bpf_probes.h"
#include "profiler/probes/program_stats.h"
#include "profiler/process/process_registry.h"
#include "profiler/resolve/frame_refresher.h"
#include "profiler/resolve/stack_resolver.h"
#include "profiler/unwind/native_unwinder.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"

namespace gpuflame::profiler {

class Session {
 public:
  struct Options {
    ProfilingOptions profiling;
    bool system_wide = false;  // every CUDA process, not only targets
    // Targets' probes attached for each target's pid alone (record
    // --per-process-probes): another job mapping the same libraries pays
    // nothing for them, and a target's child forked without exec is held
    // at its fork for its own. Else (and always machine-wide) the probes are
    // the library file's, for every process that maps it.
    bool per_process_probes = false;
    // The hand-off queue between the reader and the worker; never smaller
    // than the ring buffer (see RingReader).
    size_t queue_bytes = 16u << 20;
    // How long a library file's symbol and unwind tables stay parsed once
    // no running process maps it (SweepSymbols): a job restarted within
    // this finds them ready; past it the agent's memory gives them back.
    int64_t symbol_keep_ns = kSymbolKeepNs;
  };
  static constexpr int64_t kSymbolKeepNs = 120'000'000'000;
  // How often files are looked at for that, at most (a shorter keep time
  // looks more often).
  static constexpr int64_t kSymbolSweepNs = 10'000'000'000;

  // Checks privileges and kernel support, loads and attaches the lifecycle
  // hooks. Errors are worded for the user.
  static absl::StatusOr<std::unique_ptr<Session>> Start(const Options& options);
  ~Session();

  // A running process named by the user (followed into its children). What
  // it already held on the device, per the driver, is charged at once
  // (DriverHeld), so this drains the ring.
  absl::Status AddTarget(pid_t pid);
  // A process we started and hold before exec: gated until probes are in place.
  absl::Status AddGatedChild(pid_t pid);
  // Waits up to |timeout_ms| for records and handles them on this thread;
  // returns how many (negative: -errno, the reader failed).
  int Poll(int timeout_ms);
  // Returns once every record the ring buffer held at the call has been
  // handled (the reader is asked to read it at once).
  void Drain();
  // Exited processes have been reported for the last time: forget them here,
  // in the event processor and in BPF's loss counters. Returns their stacks'
  // ids, free for reuse (EventProcessor::RetireProcesses).
  std::vector<StackId> RetireProcesses(std::span<const pid_t> pids);
  // The end: no process is gated any more, and every one already held (its
  // record in the ring) is handled and resumed. Call once polling stops.
  void OpenGatesAndDrain();
  // A recording ends while its processes run on: their injection libraries
  // hold up to a flush period (GPUFLAME_FLUSH_MS, 1 s) of kernel records,
  // and a tick of tensor events. Each is asked to hand them over now
  // (ProcessRegistry::AskLibraryFlush), and its answer waited for while
  // records are handled, |limit_ns| at most. Call before OpenGatesAndDrain.
  struct LibraryFlush {
    uint32_t asked = 0;
    uint32_t answered = 0;
    uint32_t exited = 0;      // exited before answering: its exit flushed it
    uint32_t unanswered = 0;  // still silent at the limit: its last records may be missing
    uint32_t without_probe = 0;  // a library from before gpuflame:flushed
    uint32_t forked = 0;         // forked without exec: its copy of the library has no flusher
    uint32_t failed = 0;
    int64_t wait_ns = 0;
  };
  LibraryFlush FlushLibraries(int64_t limit_ns = kLibraryFlushLimitNs);
  // The libraries' flusher looks every 100 ms, and CUPTI's flush of a busy
  // GPU's buffers takes a few more.
  static constexpr int64_t kLibraryFlushLimitNs = 2'000'000'000;
  std::vector<std::string> TakeWarnings();
  // What processes found running held before gpuflame attached, at both
  // levels (tensor: the allocator's totals; device: the driver's, read
  // again): call before building memory profiles. Drains the ring.
  void AccountBeforeAttach();
  // Why device memory held before attach could not be read from the driver
  // ("" if it could, or no process needed it): for the profiles' comments.
  const std::string& driver_unavailable() const { return driver_held_.unavailable(); }

  EventProcessor& events() { return *events_; }
  const EventProcessor& events() const { return *events_; }
  ProcessRegistry& registry() { return *registry_; }
  const StackResolver& resolver() const { return *resolver_; }
  const NativeUnwinder& unwinder() const { return *unwinder_; }
  const symbolizer::NativeSymbolizer& native_symbols() const { return *native_; }
  std::array<uint64_t, GF_STAT_MAX> BpfStats() const { return probes_->ReadStats(); }
  // Whether the timeline's I/O programs were loaded and attached (bpf/io_calls.bpf.h).
  bool IoSpansAttached() const { return probes_->io_spans_attached(); }
  // The reader thread's counters (user-space drops, waits on a full queue).
  RingReaderStats ReaderStats() const { return reader_->stats(); }
  // Any thread (a watchdog): when the worker last called Poll, and when the
  // reader last went round its loop.
  const base::Heartbeat& worker_heartbeat() const { return worker_heartbeat_; }
  const base::Heartbeat& reader_heartbeat() const;
  // Names raw-address frames whose binaries or debug files can now be found;
  // call before building profiles. Returns how many were named.
  size_t RefreshFrames() { return refresher_->Refresh(events_->frames()); }
  const FrameRefresher& refresher() const { return *refresher_; }
  // The parsed library files held for symbols and unwinding, and those let
  // go since their processes went (SweepSymbols).
  struct SymbolFiles {
    size_t files = 0;  // ELF symbol tables, failures included
    size_t file_bytes = 0;
    size_t dwarf_files = 0;    // with DWARF open (each keeps its file mapped)
    size_t unwind_tables = 0;  // CFI tables, one per build ID
    size_t unwind_bytes = 0;
    size_t files_evicted = 0;
    size_t unwind_tables_evicted = 0;
  };
  SymbolFiles symbol_files() const;
  // gpuflame's own budget: checked about once a second from Poll; what is
  // shed, since when and why (changes()) goes into the output.
  const Guardrails& guardrails() const { return guardrails_; }
  // gpuflame's cost in the profiled processes: each BPF program's runs and
  // run time since it was loaded (kernel run-time stats, on for the session's
  // life where the kernel allows). One syscall per program; this thread only.
  std::vector<ProgramRunStats> BpfProgramStats() const { return program_stats_.Read(probes_->object()); }
  const ProgramStats& program_stats() const { return program_stats_; }

  // The recording ends. Uprobe_multi links are closed here: their
  // breakpoints are gone when it returns, so that no process started after
  // gpuflame traps on them. A perf-event uprobe's unregistration waits for
  // grace periods, one probe after another (54-160 ms each here): a child
  // inherits those descriptors and drops them after we exit.
  void DetachProbesInBackground();

 private:
  explicit Session(GuardrailLimits limits) : guardrails_(limits) {}
  void CheckGuardrails();
  // What the ring had no room for: charged to each process (EventProcessor::OnLosses).
  void CollectLosses();
  // Followed processes that are gone without an exit record (every 2 s).
  void SweepExited(int64_t now);
  // What the symbolizer and unwinder keep for processes that have gone
  // (every keep time, from 2 s to kSymbolSweepNs). A process the registry
  // still holds is not gone: its last window may not be out yet.
  void SweepSymbols(int64_t now);

  symbolizer::ElfCache elves_;
  std::unique_ptr<symbolizer::NativeSymbolizer> native_;
  std::unique_ptr<BpfProbes> probes_;
  std::unique_ptr<ProcessRegistry> registry_;
  std::unique_ptr<StackResolver> resolver_;
  std::unique_ptr<NativeUnwinder> unwinder_;
  std::unique_ptr<EventProcessor> events_;
  std::unique_ptr<FrameRefresher> refresher_;
  Guardrails guardrails_;
  DriverHeld driver_held_;
  OomDeviceMemoryReader oom_memory_;
  int64_t next_guardrail_check_ns_ = 0;
  ProgramStats program_stats_;  // keeps the kernel's BPF run-time stats on
  // Last: stopped first (~Session stops it explicitly too).
  std::unique_ptr<RingReader> reader_;
  base::Heartbeat worker_heartbeat_;
  int64_t next_loss_check_ns_ = 0;
  int64_t next_exit_sweep_ns_ = 0;
  int64_t next_symbol_sweep_ns_ = 0;
  int64_t symbol_keep_ns_ = kSymbolKeepNs;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_SESSION_H_
