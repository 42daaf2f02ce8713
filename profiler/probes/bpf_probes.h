// Owns the loaded BPF object: its maps and its links.
// open -> size/rodata -> load -> attach lifecycle hooks; library probes are
// attached later, per file, as processes map CUDA libraries. Every kernel
// resource is released by the destructor.
//
// Threads. The ring buffer is not read here: StartRingReader hands it to a
// RingReader (ring_reader.h), whose own thread reads it, while this object
// stays with the worker thread (the process registry attaches and updates
// maps through it). That split is safe because the two share no libbpf
// object: the reader uses its own ring_buffer (built from a duplicate of the
// events map's descriptor; libbpf's ring code touches only that struct and
// its mmap'd pages), and the calls made here work on the skeleton
// (bpf_program__attach_uprobe_opts: the programs) or are single syscalls on
// map descriptors (bpf_map__update_elem/lookup/delete), which the kernel
// serialises; the USDT spec table locks (usdt_specs.h). libbpf objects are not safe for concurrent use, so:
//   worker thread only: Load, Attach*, Detach*, StartCpuSampling,
//     Set*/Remove*, StartRingReader, link_count, the destructor (after the
//     RingReader it started has been stopped or not, either way: the reader
//     holds its own descriptor);
//   any thread: ReadStats (map lookups only).
#ifndef GPUFLAME_PROFILER_PROBES_BPF_PROBES_H_
#define GPUFLAME_PROFILER_PROBES_BPF_PROBES_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/probes/link_reaper.h"
#include "profiler/probes/probe_table.h"
#include "profiler/probes/ring_reader.h"

struct gpuflame_bpf;
struct bpf_link;
struct bpf_object;

namespace gpuflame::profiler {

// Model-loading I/O for the timeline (bpf/io_calls.bpf.h): off, its two
// programs are not even loaded, and no syscall pays for them.
struct IoSpanOptions {
  bool on = false;
  uint64_t min_bytes = 64 << 10;     // a read is kept from this many bytes ...
  uint64_t min_us = 1000;            // ... or this long; others are counted only
  uint32_t max_per_process = 20000;  // records per process; the rest counted only
};

class BpfProbes {
 public:
  struct Options {
    bool filter_targets = true;       // only processes in the targets map
    size_t ring_bytes = 16u << 20;    // power of two
    bool native_fallback = true;      // frame-pointer stacks for threads without Python
    int native_stacks = 1;            // stack copies for DWARF: 0 off, 1 device level, 2 all
    bool gate_new_files = false;      // machine-wide: stop the first mapper of an uncovered library
    // Probes attached per process (record): a followed process's forked
    // child says so (GF_EV_FORKED) so that its own can be attached.
    bool follow_forks = false;
    // Per-process links are detached on the link reaper's thread (a
    // uprobe_multi link's close waits a grace period, tens of ms): with
    // follow_forks, and where links come and go while profiling (the launch
    // route's windows).
    bool reap_in_background = false;
    uint32_t bench_stop_at = 0;       // benchmarks only: enum gf_bench_stage (bench/overhead_harness.cc)
    bool intern_stacks = true;        // known Python stacks sent as IDs (off: benchmarks measuring it)
    bool sync_returns_all = true;     // every synchronise call's GF_EV_CUDA_SYNC (off: NCCL processes' only)
    IoSpanOptions io_spans;           // the timeline's I/O spans
    // Tensor allocations through the probes sampled by bytes from this long
    // (ns) after a process's first tensor event; 0: exact unless shed.
    uint64_t tensor_sample_after_ns = 0;
    // Called with the descriptor of the map of held processes (`held`,
    // struct gf_held) after the object loads and before any gate can fire:
    // hands it to whoever resumes them if gpuflame is killed (its guardian,
    // profiler/process/guardian.h), which takes its own reference. Without
    // one, or if it fails, the machine-wide gate stays off (gate_warning).
    std::function<absl::Status(int held_map_fd)> share_held_map;
  };

  static absl::StatusOr<std::unique_ptr<BpfProbes>> Load(const Options& options);
  ~BpfProbes();
  BpfProbes(const BpfProbes&) = delete;
  BpfProbes& operator=(const BpfProbes&) = delete;

  // Attaches |program| at |offset| in the file at |path|, for process |pid|
  // only (its threads, and across its execs), or for every process (pid
  // kEveryProcess): uprobes live on the inode, so processes that map the
  // same file later are covered without another attach. A
  // |semaphore_offset| (a file offset) is raised in each process the probe
  // is for while it is attached, as USDT semaphores are: in no other.
  static constexpr pid_t kEveryProcess = -1;
  absl::Status AttachUprobe(pid_t pid, const std::string& path, uint64_t offset, ProbeProgram program, bool retprobe,
                            uint64_t cookie, uint64_t semaphore_offset = 0);
  // The same for many sites of one file: where the kernel makes
  // uprobe_multi links (uprobe_multi.h), one link per program and kind
  // (entry or return) holds them all, removed at once and in one grace
  // period; else one perf-event uprobe each. A group the kernel refuses is
  // skipped (it attaches all of a link or none): |attached| counts the
  // sites in place, |status| says the first refusal.
  struct UprobeSite {
    uint64_t offset = 0;
    ProbeProgram program{};
    bool retprobe = false;
    uint64_t cookie = 0;
    uint64_t semaphore_offset = 0;
  };
  struct Attached {
    size_t attached = 0;
    absl::Status status;
  };
  Attached AttachUprobes(pid_t pid, const std::string& path, std::span<const UprobeSite> sites);
  // The order the sites go in: return probes before entry probes (why:
  // bpf_probes.cc), otherwise as given.
  static std::vector<UprobeSite> AttachOrder(std::span<const UprobeSite> sites);
  // The same, the links handed to the caller (appended to |links|), who
  // gives each back with Release: probes held for a while only (the launch
  // route's, for a launch window).
  Attached AttachUprobesOwned(pid_t pid, const std::string& path, std::span<const UprobeSite> sites,
                              std::vector<ProbeLink>& links);
  // The sites of one USDT probe (a provider:name's notes, usdt_notes.h),
  // attached as uprobes the way AttachUprobes attaches them, each with its
  // argument spec's ID as its cookie (usdt_specs.h) and its semaphore.
  // |attached| counts the sites in place, |status| says the first refusal
  // (NotFound without sites).
  struct UsdtSite {
    uint64_t offset = 0;
    uint64_t semaphore_offset = 0;  // 0: none
    gf_usdt_spec spec{};
  };
  // With |owned|, its links go there, each given back with Release (a
  // probe held for a moment: gpuflame:flushed).
  Attached AttachUsdt(pid_t pid, const std::string& path, std::span<const UsdtSite> sites, ProbeProgram program,
                      std::vector<ProbeLink>* owned = nullptr);
  // Undoes the last link made: a hello site another agent held (one site,
  // one link).
  void DetachLast();
  // A uprobe on a site that never runs, attached only to raise its
  // |semaphore_offset| (the library's thrift sites, GF_THRIFT_SITES), owned
  // by the caller, who gives it back with Release. A perf-event link: one
  // site gains nothing from an uprobe_multi one.
  absl::StatusOr<ProbeLink> AttachSwitch(pid_t pid, const std::string& path, uint64_t offset, uint64_t semaphore_offset,
                                         ProbeProgram program);
  // Detaches a link AttachSwitch made (a per-process one on the reaper's
  // thread, as DetachProcess does).
  void Release(ProbeLink link);
  // Drops every probe attached for |pid| alone (it exited), on the reaper's
  // thread: the call returns at once.
  void DetachProcess(pid_t pid);
  // Closes every uprobe_multi link now (the recording ends): their
  // breakpoints are gone when this returns, one grace period each, waited
  // for side by side. The perf-event links stay (DetachProbesInBackground).
  void CloseUprobeMultiLinks();

  // One cpu-clock perf event per online CPU, |hz| samples per second of CPU
  // time, feeding the cpu_sample program (which keeps profiled processes only).
  absl::Status StartCpuSampling(int hz);

  absl::Status SetTarget(pid_t pid, uint32_t flags);
  void RemoveTarget(pid_t pid);
  // Writes a Python process's layout; each write seeds its stack IDs anew.
  absl::Status SetPython(pid_t pid, const gf_py_proc& layout);
  // A library file (its inode and device as the kernel encodes them) whose
  // probes are in place: processes that map it are not gated any more.
  void MarkCovered(uint64_t inode, uint64_t dev);
  void RemovePython(pid_t pid);

  // Starts the thread that reads the events ring buffer (see RingReader).
  absl::StatusOr<std::unique_ptr<RingReader>> StartRingReader(const RingReader::Options& options) const;
  std::array<uint64_t, GF_STAT_MAX> ReadStats() const;
  // Records the ring had no room for, per (process, domain, kind),
  // cumulative (struct gf_loss); at most |max| entries. Worker thread.
  std::vector<std::pair<gf_loss_key, gf_loss>> ReadLosses(size_t max) const;
  // Takes up to |max| lost allocations and frees out of the LRU map
  // (struct gf_lost_key): each is handed out once. Worker thread.
  std::vector<std::pair<gf_lost_key, gf_lost_event>> TakeLostEvents(size_t max);
  // An exited process's loss counters, once its last window is out.
  void ForgetLosses(pid_t pid);
  // What the BPF programs shed from now on (enum gf_shed bits), for the
  // guardrails. Worker thread; takes effect at the programs' next event.
  void SetShed(uint32_t shed);
  // No process is gated from now on (we are about to stop reading).
  void OpenGates();
  // Why the machine-wide gate asked for is off (the map of held processes
  // could not be shared); empty when it is on or was not asked for.
  const std::string& gate_warning() const { return gate_warning_; }
  size_t link_count() const;
  // Whether the I/O programs are loaded and attached (IoSpanOptions::on).
  bool io_spans_attached() const { return io_spans_attached_; }
  // The loaded libbpf object, for ProgramStats::Read (each program's run-time
  // counters). Worker thread only, like every other use of the object.
  const bpf_object* object() const;

 private:
  BpfProbes() = default;

  // Owners of the libbpf objects (the skeleton's deleter in the .cc, where
  // its type is complete). Members are destroyed in reverse order, which is
  // the teardown order: the reaper and the links (they point at the
  // skeleton's programs, and USDT links hold specs in its map), then the
  // skeleton (programs and maps). A RingReader keeps its own duplicate of
  // the events map's descriptor, so it may outlive this object.
  struct SkeletonDeleter {
    void operator()(gpuflame_bpf* skel) const;
  };
  using LinkPtr = BpfLinkPtr;

  // An attach starts: the reaper waits for the burst to end.
  void NoteAttach();
  // AttachUprobes, and AttachUsdt's sites (|usdt|: their cookies are spec
  // IDs, each link holds references to its own).
  Attached AttachSites(pid_t pid, const std::string& path, std::span<const UprobeSite> sites, bool usdt,
                       std::vector<ProbeLink>* owned = nullptr);
  // Keeps |link|, a probe for |pid| (kEveryProcess: the machine's).
  void Keep(pid_t pid, ProbeLink link);
  // Destroys |link|: a per-process probe on the reaper's thread (its close
  // waits for a grace period), any other here.
  void Destroy(ProbeLink link);

  std::unique_ptr<gpuflame_bpf, SkeletonDeleter> skel_;
  std::vector<ProbeLink> links_;  // the lifecycle hooks, the sampler, probes for every process
  absl::flat_hash_map<pid_t, std::vector<ProbeLink>> process_links_;  // probes for one process
  pid_t last_attached_ = kEveryProcess;                               // whose list DetachLast pops
  std::shared_ptr<UsdtSpecTable> usdt_specs_;  // in the skeleton's map; its links hold references
  std::atomic<int64_t> last_attach_ns_{0};  // CLOCK_MONOTONIC of the latest attach: the reaper gives way
  std::unique_ptr<LinkReaper> reaper_;      // with follow_forks or reap_in_background only
  std::string gate_warning_;
  bool io_spans_attached_ = false;
  bool uprobe_multi_ = false;   // plain uprobes as uprobe_multi links (set at Load)
  uint32_t py_generation_ = 0;  // SetPython's last seed (the registry's thread)
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_BPF_PROBES_H_
