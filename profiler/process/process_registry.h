// Which processes gpuflame follows and what it has attached for them.
// Discovery is driven by BPF lifecycle events (exec, executable mappings of
// CUDA/PyTorch/libpython, Py_FinalizeEx, exit): a gated process is stopped by
// its BPF hook and resumed here once every probe it needs is in place, so its
// first allocation is already seen. Not thread-safe: event loop only.
#ifndef GPUFLAME_PROFILER_PROCESS_PROCESS_REGISTRY_H_
#define GPUFLAME_PROFILER_PROCESS_PROCESS_REGISTRY_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "inspect/process_memory.h"
#include "profiler/probes/bpf_probes.h"
#include "profiler/process/k8s_metadata.h"
#include "profiler/process/launch_route_sites.h"
#include "profiler/process/service_hints.h"
#include "profiler/process/thrift_sites.h"
#include "symbolizer/elf_cache.h"
#include "symbolizer/native_symbolizer.h"
#include "symbolizer/python_code.h"

namespace gpuflame::profiler {

// Where PyTorch's caching-allocator events are observed.
enum class TensorEvents : uint8_t {
  kAuto,       // per process: in-process where it loads libgpuflame_cupti.so, else probes
  kProbes,     // USDT pytorch:malloc/free (or the report uprobe): a trap per event
  kInProcess,  // libgpuflame_cupti.so's GOT hook, batched: no trap per event
};

struct ProcessInfo {
  pid_t pid = 0;
  std::string comm;
  PodInfo pod;  // read at discovery: a process may be gone by its last window
  ServiceHints service;  // its service outside Kubernetes: read at discovery and at exec
  bool has_cuda = false;
  bool has_torch = false;
  // Its tensor events come from libgpuflame_cupti.so's in-process hook, so
  // it needs no probe on libc10_cuda.so (decided once, see TensorInProcess).
  std::optional<bool> tensor_inprocess;
  int64_t tensor_wait_since_ns = 0;  // in-process: its hook is due 3 s after this (library mapped, or last released from a gate)
  bool has_cupti = false;  // libgpuflame_cupti.so is loaded
  uint32_t cupti_status = 0;  // enum gf_cupti_status, 0 until it reports
  uint32_t cupti_abi = 0;     // the library's GF_ABI_VERSION, 0 until it reports (or unversioned)
  uint32_t tensor_hook = 0;         // enum gf_tensor_hook: the in-process hook's state, 0 until it reports
  uint32_t tensor_hook_python = 0;  // while live: 0, or the gf_tensor_hook reason it has no Python frames
  uint64_t tensor_sample_bytes = 0;  // while live: its sampling interval, 0 when every allocation is sent
  uint32_t autograd_hook = 0;       // enum gf_autograd_hook: the backward-origin hook's state, 0 until it reports
  bool kernel_time_reported = false;  // "kernel time unavailable" said once
  int64_t cuda_driver_since_ns = 0;   // when libcuda.so was first seen mapped (CLOCK_MONOTONIC), 0: not yet
  std::optional<bool> injection_named;  // its environment names libgpuflame_cupti.so (read once, when needed)
  std::optional<uint64_t> cpu_ticks;  // its CPU time (user + system) when last sampled
  bool exited = false;
  // Found running with CUDA or PyTorch already loaded (the agent's start,
  // `--pid`): what it allocated before then was not seen.
  bool attached_late = false;
  // Forked from a followed process without exec (GF_EV_FORKED): it has its
  // parent's breakpoints and semaphore counts already (see SayHello).
  bool forked = false;
  bool launch_route_warned = false;  // a launch window it could not serve, said once
  // Its libgpuflame_cupti.so as mapped, once probed, for the flush asked at
  // a recording's end (AskLibraryFlush).
  std::optional<inspect::Mapping> cupti_library;
  uint64_t library_flushed_ns = 0;  // the library's last answer (gpuflame:flushed), BPF's clock
  bool execed = false;              // an exec since it was found: a forked child's is its own image
  std::optional<inspect::PythonLayout> python;
  std::string python_module;  // libpython's or the static interpreter's path
  std::unique_ptr<inspect::RemoteProcessMemory> memory;
  std::unique_ptr<symbolizer::PythonCodeReader> code;
};

class ProcessRegistry {
 public:
  struct Options {
    uint32_t target_flags = GF_TARGET_TRACE;  // for processes we add
    bool filtered = true;  // BPF only reports processes in the targets map
    // Where tensor events come from. In-process: no probe on libc10_cuda.so
    // or libc10.so (a trap per event), the library's gpuflame:tensor_batch.
    TensorEvents tensor_events = TensorEvents::kAuto;
    // Ask libgpuflame_cupti.so for CUPTI activity all the time (else it
    // duty-cycles it and weights its records).
    bool kernel_time_exact = true;
    // Every tensor allocation from the injection library (gpuflame:tensor_exact), not a sample by bytes.
    bool tensor_exact = true;
    // Attach the synchronise-call probes (ProfilingOptions::sync_waits).
    bool sync_waits = false;
    // Ask libgpuflame_cupti.so for every launch, copy and memset call,
    // entry to return (gpuflame:api_batch): the timeline's spans and arrows.
    bool api_spans = false;
    // Probes for the followed processes alone (record), each attached for
    // its pid; else for every process mapping the file (the agent, which
    // follows the machine). Per process, a process outside the recording
    // that maps the same library takes no trap and has no semaphore
    // raised: its USDT-gated work (the injection library's CUPTI
    // callbacks) stays off.
    bool per_process_probes = false;
    // Launch stacks by the launch route (bpf/gpuflame_abi.h): uprobes on
    // libcuda's launch entry points in the library's launch windows, joined
    // to its records of those calls, instead of its CUPTI callbacks. This
    // asks the library for the route. Its windows are followed either way:
    // the switch is the process's, so a gpuflame that asks for the
    // callbacks beside one that asks for the route takes its stacks from
    // the route's windows too (else it would get none).
    bool launch_route = false;
  };
  // |native| (optional) is given each process's maps as they are read.
  ProcessRegistry(BpfProbes& probes, symbolizer::ElfCache& elves, Options options,
                  symbolizer::NativeSymbolizer* native = nullptr);
  const Options& options() const { return options_; }

  // A process named by the user or started by us.
  absl::Status AddTarget(pid_t pid);
  // Every process already running that maps a CUDA library (system-wide mode).
  void ScanAll();

  // |inode|/|dev|: the mapped file as the kernel names it; |stopped_ns|: when
  // the gate stopped it (CLOCK_MONOTONIC), for the pause's length.
  // |held_for|: what the gate was for when no file was mapped (the pause's name).
  void OnLibraryMapped(pid_t pid, bool gated, uint64_t inode = 0, uint64_t dev = 0, uint64_t stopped_ns = 0,
                       std::string_view held_for = "(exec)");
  // How long gates held processes: count and quantiles, in nanoseconds.
  struct GateStats {
    uint64_t count = 0;
    uint64_t p50_ns = 0, p99_ns = 0, max_ns = 0;
    std::string slowest_file;  // the mapping the longest pause was for (its base name)
  };
  GateStats gate_stats() const;
  void OnExec(pid_t pid, bool gated);
  // A followed process's child from fork() (GF_EV_FORKED; per-process
  // probes only), at |forked_ns| (CLOCK_MONOTONIC), held there if |gated|.
  void OnForked(pid_t pid, pid_t parent, bool gated, uint64_t forked_ns);
  void OnFinalize(pid_t pid, bool gated);
  void OnExit(pid_t pid);
  // The injection library said what it does (enum gf_cupti_status) and
  // which GF_ABI_VERSION it speaks; on a mismatch, warns once (the event
  // processor ignores the process's kernel records).
  void OnCuptiStatus(pid_t pid, uint32_t status, uint32_t abi_version, uint64_t ts_ns = 0);
  // The library opened or closed a launch window (the launch route): its
  // uprobes go in or out (launch_route_sites.h).
  void OnLaunchWindow(pid_t pid, bool open, uint64_t now_ns);
  const LaunchRouteSites& launch_route() const { return launch_route_; }
  // The library's in-process tensor hook went live (with or without Python
  // frames) or could not (enum gf_tensor_hook); says what the user loses.
  void OnTensorHook(pid_t pid, uint32_t status, uint32_t python, uint32_t abi_version, uint64_t sample_bytes = 0);
  // The library's backward-origin hook (Engine::execute) went live or could
  // not (enum gf_autograd_hook); warns once when PyTorch is there but its
  // engine threads' work cannot be given its Python caller.
  void OnAutogradHook(pid_t pid, uint32_t status);
  // The CPU time the followed processes have used since they were first
  // sampled, summed and never decreasing (exited processes keep what they
  // used): nanoseconds. Reads /proc/PID/stat of each live one (a bounded
  // read, which never blocks). What gpuflame's cost is a share of.
  uint64_t SampleFollowedCpuNs();
  // Says once per CUDA process without the injection library that it gets
  // no kernel time (called when kernel time was asked for). |used_gpu|: it
  // has allocated device memory, so it has run cuInit, where CUDA loads the
  // library (tools that only map the driver, like nvidia-smi, are not
  // judged); a process found running with the driver mapped is judged
  // anyway. |now_ns| (CLOCK_MONOTONIC): a check while the process runs (the
  // agent's window cut); none: the recording's end.
  void CheckKernelTime(absl::FunctionRef<bool(pid_t)> used_gpu, std::optional<int64_t> now_ns = std::nullopt);
  // Drops everything known about an exited pid (the pid may be reused).
  void Forget(pid_t pid);
  // A watched library file has been handled (probes attached, or given up
  // on): the machine-wide gate lets its later mappers run on.
  void Cover(uint64_t inode, uint64_t dev);
  // Re-scans processes whose new mappings may not have been visible yet,
  // and gives up on in-process hooks that never said they are live, after
  // |catch_up| (which reads every event sent so far) if one looks late.
  void Tick(const std::function<void()>& catch_up = nullptr);

  ProcessInfo* Find(pid_t pid);
  // A process seen only through a CPU sample (a followed child, such as a
  // DataLoader worker): learn its name, pod and interpreter once.
  void Observe(pid_t pid) {
    if (!Find(pid)) Scan(pid);
  }
  const absl::flat_hash_map<pid_t, std::unique_ptr<ProcessInfo>>& processes() const {
    return processes_;
  }
  // Messages for the user, each once ("pid 42: Python 3.8 is not supported...").
  std::vector<std::string> TakeWarnings();
  // Library files probed: (process, file) pairs with per-process probes.
  size_t attached_files() const { return attached_.size(); }
  // The thrift sites held in the injection library files probed: the
  // overhead ladder's level (Session::CheckGuardrails sets it).
  void SetThrift(uint32_t level);
  const ThriftSites& thrift() const { return thrift_; }
  // A recording ends while its processes run on: each live one whose
  // injection library we probe is asked to flush now, not at its next flush
  // period, by gpuflame:flushed held (bpf/gpuflame_abi.h), and answers at
  // that probe (library_flushed_ns). Give the ask back with EndLibraryFlush
  // once answered: the library flushes every tick while it is held.
  struct LibraryFlushAsk {
    std::vector<pid_t> asked;
    uint32_t without_probe = 0;  // a library from before gpuflame:flushed
    uint32_t forked = 0;         // forked without exec: no flusher thread in its copy of the library
    uint32_t failed = 0;         // the attach failed: said as a warning
    std::vector<ProbeLink> links;
  };
  LibraryFlushAsk AskLibraryFlush();
  void EndLibraryFlush(LibraryFlushAsk& ask);

 private:
  using FileKey = inspect::FileKey;
  // A file probed, and for which process (0: every process, the agent).
  using AttachKey = std::pair<pid_t, FileKey>;
  AttachKey Attached(pid_t pid, const FileKey& file) const { return {options_.per_process_probes ? pid : 0, file}; }
  // The pid a probe for |pid|'s sake is attached for.
  pid_t ProbeScope(pid_t pid) const { return options_.per_process_probes ? pid : BpfProbes::kEveryProcess; }
  // Its own probes go with it (per-process probes).
  void DetachProcess(pid_t pid);

  void Scan(pid_t pid);
  // libcuda mapped in |pid|: its launch entry points for the launch route.
  void AddLaunchRoute(pid_t pid, const inspect::Mapping& m, ProcessInfo& info);
  void AttachLibrary(pid_t pid, const inspect::Mapping& m, LibraryKind kind,
                     const std::vector<inspect::Mapping>& maps, ProcessInfo& info);
  // c10::reportMemoryUsageToProfiler in the libc10.so that |c10_cuda| (a
  // libc10_cuda.so mapping) uses: the one beside it, else the only one mapped.
  enum class TorchReport { kAttached, kNotMappedYet, kUnavailable };
  TorchReport AttachTorchReport(pid_t pid, const inspect::Mapping& c10_cuda,
                                const std::vector<inspect::Mapping>& maps);
  // c10::reportOutOfMemoryToProfiler in that libc10.so (|path|, pinned),
  // beside the report probe: how an out-of-memory episode ended.
  void AttachTorchOom(pid_t pid, const std::string& path, const symbolizer::ElfFile& c10);
  // Whether |info|'s tensor events come in-process (decided once per process).
  bool TensorInProcess(ProcessInfo& info);
  // The library cannot serve |info|'s tensor events (|why|): probes instead.
  void FallBackToProbes(ProcessInfo& info, const std::string& why);
  // How long a process that loaded the library may take to say its hook is live.
  static constexpr int64_t kHookDueNs = 3'000'000'000;
  // Attaches this agent's hello site (GF_HELLO_SITES) in the library at
  // |path| (mapped by |pid| as |lib| among |maps|), last, once its other
  // probes listen. A site another agent already holds raises nothing (the
  // kernel counts a breakpoint once, whoever else waits on it), so the
  // library would not greet us: where |pid|'s count did not rise, the next
  // site is tried. A library without the sites is from before them.
  // USDT probe |provider|:|name| of |elf| (at |path|), for |pid|'s scope.
  // With |owned|, its links go there (BpfProbes::AttachUsdt).
  absl::Status AttachUsdt(pid_t pid, const std::string& path, const symbolizer::ElfFile& elf, std::string_view provider,
                          std::string_view name, ProbeProgram program, std::vector<ProbeLink>* owned = nullptr);
  void SayHello(pid_t pid, const std::string& path, const symbolizer::ElfFile& elf, const inspect::Mapping& lib,
                const std::vector<inspect::Mapping>& maps);
  void Warn(std::string message);
  // Says so when |m|'s file could not be opened for want of permission
  // (|err|, the open's errno): its probes are then missing.
  void WarnIfRefused(const inspect::Mapping& m, int err);
  ProcessInfo& Ensure(pid_t pid);

  BpfProbes& probes_;
  symbolizer::ElfCache& elves_;
  ThriftSites thrift_{probes_};
  LaunchRouteSites launch_route_{probes_};
  bool found_running_ = false;  // Scan of a process found running (AddTarget, ScanAll), not one mapping a library now
  // This agent's hello site, first chosen at random: another agent (or the
  // last session's probes, lingering) most likely holds another; where it
  // does, the next free one.
  uint32_t hello_site_;
  absl::flat_hash_set<std::pair<uint64_t, uint64_t>> covered_;
  std::vector<uint64_t> gate_pauses_ns_;  // the last kMaxPauses
  uint64_t gates_ = 0;
  uint64_t slowest_gate_ns_ = 0;
  std::string slowest_gate_file_;
  static constexpr size_t kMaxPauses = 4096;
  Options options_;
  symbolizer::NativeSymbolizer* native_;
  absl::flat_hash_map<pid_t, std::unique_ptr<ProcessInfo>> processes_;
  uint64_t followed_cpu_ticks_ = 0;  // SampleFollowedCpuNs's running total
  int64_t next_hook_check_ns_ = 0;   // Tick looks for overdue hooks once a second
  absl::flat_hash_map<AttachKey, LibraryKind> attached_;
  absl::flat_hash_map<pid_t, int> rescans_;  // pid -> scans left
  static constexpr size_t kMaxWarned = 4096;
  absl::flat_hash_set<std::string> warned_;
  std::vector<std::string> warnings_;
};

// What the user is told when |pid|'s libgpuflame_cupti.so speaks ABI
// |library_abi| and this gpuflame GF_ABI_VERSION.
std::string CuptiAbiMismatchWarning(pid_t pid, const std::string& comm, uint32_t library_abi);

// Stops until |pid| is in the stopped state (a gate's SIGSTOP has landed),
// bounded in time; false if it exited or never stopped.
bool WaitStopped(pid_t pid, int timeout_ms);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_PROCESS_REGISTRY_H_
