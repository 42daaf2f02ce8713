// The event loop's body: decodes each ring-buffer record, keeps the process
// registry current, interns the stack and updates the allocation tracker.
// The hot path (a known stack) does no allocation and no syscalls.
// Not thread-safe: called from BpfProbes::Poll on the event-loop thread.
#ifndef GPUFLAME_PROFILER_PIPELINE_EVENT_PROCESSOR_H_
#define GPUFLAME_PROFILER_PIPELINE_EVENT_PROCESSOR_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "profiler/aggregate/allocation_tracker.h"
#include "profiler/aggregate/kernel_joiner.h"
#include "profiler/aggregate/launch_route_joiner.h"
#include "profiler/aggregate/profile_builder.h"
#include "profiler/aggregate/time_tracker.h"
#include "profiler/collectives/nccl_tracker.h"
#include "profiler/forensics/oom_episodes.h"
#include "profiler/pipeline/stack_ids.h"
#include "profiler/process/process_registry.h"
#include "profiler/resolve/stack_resolver.h"
#include "profiler/resolve/stack_table.h"
#include "profiler/timeline/timeline.h"
#include "profiler/unwind/native_unwinder.h"
#include "profiler/utilization/utilization.h"

namespace gpuflame::profiler {

struct AllocatorTotals {
  uint64_t allocated = 0;  // caching allocator's allocated bytes (report hook), summed over devices
  uint64_t reserved = 0;   // caching allocator's reserved bytes (report hook), summed over devices
  bool known = false;
  // Each event reports its device's totals: kept per device (devices past
  // the last slot share it), so a process on several GPUs sums right.
  static constexpr size_t kDevices = 16;
  std::array<uint64_t, kDevices> allocated_on{};
  std::array<uint64_t, kDevices> reserved_on{};
  void Update(uint64_t device, uint64_t allocated_now, uint64_t reserved_now) {
    const size_t d = device < kDevices ? device : kDevices - 1;
    allocated += allocated_now - allocated_on[d];  // modular: exact once every device has reported
    reserved += reserved_now - reserved_on[d];
    allocated_on[d] = allocated_now;
    reserved_on[d] = reserved_now;
    known = true;
  }
};

struct ProcessorStats {
  uint64_t records = 0;
  uint64_t malformed = 0;
  uint64_t mapped_bytes = 0;  // cuMemMap minus cuMemUnmap
  uint64_t map_calls = 0;
  uint64_t cpu_samples = 0;
  uint64_t foreign_abi_records = 0;           // kernel records ignored: the library speaks another ABI
  uint64_t over_budget_events = 0;            // events on new stacks while stacks were frozen (guardrails)
  uint64_t inprocess_events = 0;              // tensor events from libgpuflame_cupti.so's in-process hook
  uint64_t inprocess_stacks = 0;              // Python stacks it sent (each once per flush period)
  uint64_t inprocess_unknown_stacks = 0;      // events naming a stack not received (charged to kStackUnknownFrame)
  uint64_t bpf_tensor_events_superseded = 0;  // probe events of a process whose in-process hook is live
  // Work of autograd's engine threads (no Python frames) during a backward() call:
  uint64_t autograd_events = 0;            // tensor allocations charged to the caller's stack
  uint64_t autograd_events_ambiguous = 0;  // ... made while several calls ran (kAutogradAmbiguousFrame)
  uint64_t autograd_launches = 0;          // sampled launches charged to the caller's stack
  uint64_t autograd_launches_ambiguous = 0;
  uint64_t autograd_unknown_origins = 0;  // naming a caller stack not received (tensor: kStackUnknownFrame)
  // The same found by BPF (GF_EVF_BACKWARD_CALLER: the probes' path, CPU samples), per record kind:
  uint64_t lent_allocations = 0;  // allocations (tensor or device) and device calls' entry stacks
  uint64_t lent_allocations_ambiguous = 0;
  uint64_t lent_launches = 0;
  uint64_t lent_launches_ambiguous = 0;
  uint64_t lent_cpu_samples = 0;
  uint64_t lent_cpu_samples_ambiguous = 0;
  uint64_t lost_records = 0;  // the ring buffer had no room: charged to kLostFrame (OnLosses)
  uint64_t sync_calls = 0;         // synchronise calls from the probes (GF_EV_CUDA_SYNC)
  uint64_t io_calls = 0;           // GF_EV_IO records decoded (the timeline's I/O spans)
  uint64_t io_calls_unused = 0;    // ... with no timeline to take them
  uint64_t api_calls = 0;          // CUDA API call records (GF_EV_API_BATCH): the timeline's spans
  uint64_t api_calls_unused = 0;   // ... with no timeline to take them
  // The launch route's records the library could not convert (CUPTI named
  // no thread, or no clock pair yet): their kernels' stacks are not taken.
  uint64_t launch_records_unconverted = 0;
  // Launch stacks the launch route joined: kernel time only (no NCCL call's
  // kernels, no timeline stack: they come a flush late).
  uint64_t launches_late = 0;
  uint64_t sync_calls_unused = 0;  // ... with no utilization to take them (kernel time off)
  // Python stacks BPF interned (struct gf_stack_id):
  uint64_t stack_id_records = 0;  // records that named a stack sent before by its ID
  uint64_t stack_id_unknown = 0;  // ... one whose frames were not kept (charged to kStackUnknownFrame)
  uint64_t exits_inferred = 0;    // processes found gone without their exit record (OnProcessGone)
};

// Records of one process the ring buffer had no room for (OnLosses), by kind.
struct ProcessLoss {
  uint64_t records = 0;
  uint64_t allocs = 0;  // under kLostFrame in its memory profiles, bytes exact
  uint64_t alloc_bytes = 0;
  uint64_t frees = 0;        // applied to what they freed where BPF could keep them
  uint64_t cpu_samples = 0;  // under kLostFrame in its CPU profile
  uint64_t launches = 0;     // launch stacks: their kernels are charged by share
  uint64_t other = 0;
};

// What libgpuflame_cupti.so has cost the profiled processes (GF_EV_LIB_COST),
// summed over them. Each process reports cumulative figures; the sums grow
// by their differences, so they stay whole after processes exit.
struct LibraryCost {
  uint64_t hook_calls = 0;         // in-process allocator events
  uint64_t hook_ns = 0;            // their time (estimated from one in 64)
  uint64_t callback_ns = 0;        // our CUPTI callbacks (estimated from one in 64)
  uint64_t thread_ns = 0;          // the library's own threads: flusher, buffer conversion
  uint64_t cupti_overhead_ns = 0;  // CUPTI's own OVERHEAD records
  uint64_t processes = 0;          // that reported at all
  // In the profiled processes' time, ours: what the overhead budget adds to
  // the BPF programs' run time. CUPTI's overhead records are not in it:
  // they cover instrumentation work, not time taken from the workload alone.
  uint64_t ns() const { return hook_ns + callback_ns + thread_ns; }
};

// The frame that stands for every stack not interned while gpuflame was over
// its memory budget: the events are counted, their stacks are not kept.
inline constexpr const char* kOverBudgetFrame = "[gpuflame over memory budget]";
// The frame for in-process tensor events whose stack definition never
// arrived (a batch lost, or an agent that attached after the stack was sent
// and before the library's next flush period), and for probe records naming
// a stack ID whose frames were not kept (stack_ids.h).
inline constexpr const char* kStackUnknownFrame = "[stack not received]";
// The frame for what the ring buffer had no room for: allocations (their
// bytes and, kept by BPF without stacks, their in-use share), CPU samples.
inline constexpr const char* kLostFrame = "[lost: ring buffer full]";
// The frame for tensor memory a process held when gpuflame attached to it.
inline constexpr const char* kBeforeAttachFrame = "[allocated before gpuflame attached]";
// The same once the process's tensor allocations are sampled: the
// allocator's exact total less an estimate of what gpuflame saw in use, so
// an estimate itself (noisy, never below 0). The name says so.
inline constexpr const char* kBeforeAttachEstimateFrame = "[allocated before gpuflame attached: estimate]";
// The frame for device memory a process held when gpuflame attached to it,
// as the driver counts it (NVML): its CUDA context too (hundreds of MiB on a
// real GPU), which no allocation call made, so it is not the sum of the
// segments gpuflame would have seen allocated. The name says so.
inline constexpr const char* kHeldBeforeAttachFrame =
    "[held before gpuflame attached, per the driver (NVML): includes the CUDA context]";
// The frame between a backward() caller's Python stack and the work that
// autograd's engine threads did for it (allocations, launches).
inline constexpr const char* kAutogradFrame = "<autograd engine>";
// ... and in place of the caller's stack when several backward() calls ran
// at once: whose work it was cannot be told, so it is not guessed.
std::string AutogradAmbiguousFrame(uint64_t concurrent);

class EventProcessor {
 public:
  // |registry| may be null in benchmarks and unit tests that feed events for
  // processes the registry does not know (stacks then resolve to markers).
  EventProcessor(ProcessRegistry* registry, StackResolver& resolver, NativeUnwinder* unwinder = nullptr);

  void OnRecord(std::span<const uint8_t> record);

  // CPU samples are worth |period_ns| each; with |thread_names|, each is
  // labelled with its thread's name (off by default: series cardinality).
  void SetCpuSampling(int64_t period_ns, bool thread_names) {
    cpu_period_ns_ = period_ns;
    thread_names_ = thread_names;
  }
  int64_t cpu_period_ns() const { return cpu_period_ns_; }
  // While frozen (the guardrails' last memory step), stacks not seen before
  // are not interned: their events go to one kOverBudgetFrame stack per
  // process and domain, so memory stops growing and nothing is lost.
  void SetFrozen(bool frozen) { frozen_ = frozen; }
  // record --timeline and the agent's flight recorder: every sample,
  // allocation, free, launch and GPU record also goes to |timeline| (null:
  // off, one pointer test per event); retired processes leave it too.
  void SetTimeline(timeline::Timeline* timeline) { timeline_ = timeline; }
  // record: GPU activity, synchronise waits, CPU samples and clock pairs
  // also go to |utilization| (why the GPU idles; null: off).
  void SetUtilization(utilization::Utilization* utilization) { utilization_ = utilization; }
  TimeTracker& cpu() { return cpu_; }
  const TimeTracker& cpu() const { return cpu_; }
  TimeTracker& kernels() { return kernels_; }
  const TimeTracker& kernels() const { return kernels_; }
  KernelJoiner& joiner() { return joiner_; }
  const KernelJoiner& joiner() const { return joiner_; }
  const LaunchRouteJoiner& launch_route() const { return route_; }
  // The launch route's hits past their time go, counted (their records
  // never came), also while no window or record arrives to do it (a
  // window that closed before the agent heard it open).
  // At the time of the newest record handled, not |now_ns| alone: a worker
  // behind the ring must not expire hits whose records wait in its queue.
  void ExpireLaunchHits(uint64_t now_ns) { route_.Expire(std::min(now_ns, newest_ts_ns_)); }

  const AllocationTracker& tracker() const { return tracker_; }
  // A window starts (the agent): peaks from here are the window's.
  void StartPeakWindow() { tracker_.StartPeakWindow(); }
  // Out-of-memory episodes (GF_EV_ALLOC_FAILED, GF_EV_OOM_REPORT): their
  // captures are taken from here (OomEpisodes::Take); Tick from the loop.
  OomEpisodes& oom() { return oom_; }
  // Every NCCL call and the hangs among them (profiler/collectives/); Tick from the loop.
  NcclTracker& nccl() { return nccl_; }
  const NcclTracker& nccl() const { return nccl_; }
  const OomEpisodes& oom() const { return oom_; }
  // What the registry says of |pid| for an out-of-memory capture (its name,
  // pod, whether it makes tensor events); the device's memory is not read here.
  OomProcessContext OomContext(pid_t pid) const;
  // Exited processes have been reported for the last time: their stacks are
  // freed and their ids reused (see StackTable::Retire), so that a pid can be
  // reused by another process cleanly and the agent's memory does not grow
  // with process churn. One pass over the stacks for all of them. Returns
  // the retired ids, for state kept per id outside the pipeline (a window's
  // last values).
  std::vector<StackId> RetireProcesses(std::span<const pid_t> pids);
  // A followed process is gone but its exit record never came (lost in a
  // full ring, or it died before its probes): handled as that record is, so
  // its live set, stacks and registry entry do not outlive it.
  void OnProcessGone(pid_t pid, uint64_t now_ns);
  // Allocations of an exited process that arrived after its exit record.
  void ForgetLiveAllocations(pid_t pid) { tracker_.OnProcessExit(pid); }
  const StackTable& stacks() const { return stacks_; }
  const FrameTable& frames() const { return frames_; }
  StackSource stack_source() const { return {stacks_, frames_}; }
  FrameTable& frames() { return frames_; }
  const ProcessorStats& stats() const { return stats_; }
  const absl::flat_hash_map<uint32_t, AllocatorTotals>& allocator_totals() const { return totals_; }
  // Count of records by enum gf_event_kind, for the summary.
  uint64_t kind_count(uint8_t kind) const { return kind < kKinds ? by_kind_[kind] : 0; }
  // The process's libgpuflame_cupti.so said it speaks another GF_ABI_VERSION:
  // its kernel records (launches, activity, names) are ignored.
  bool ForeignAbi(pid_t pid) const {
    return !foreign_abi_.empty() && foreign_abi_.contains(static_cast<uint32_t>(pid));
  }
  const LibraryCost& library_cost() const { return library_cost_; }

  // What the ring buffer had no room for (bpf/gpuflame_abi.h, struct
  // gf_loss), cumulative per (process, domain, kind) as BPF counts it: the
  // growth since the last call is charged to each process's kLostFrame.
  void OnLosses(std::span<const std::pair<gf_loss_key, gf_loss>> totals);
  // Lost allocations and frees themselves (struct gf_lost_key), each once:
  // applied to the live set, so in-use bytes stay exact. Call after
  // OnLosses with the totals read before these were taken.
  void OnLostEvents(std::vector<std::pair<gf_lost_key, gf_lost_event>> events);
  // Tensor bytes a process allocated before gpuflame attached to it (the
  // agent restarted, `record --pid`): what its caching allocator says it
  // holds beyond the in-use bytes we track goes to kBeforeAttachFrame's
  // in use (no object count: not known); to kBeforeAttachEstimateFrame's
  // once what we track is an estimate (its allocations sampled, in-process
  // or by the probes). Only for processes found running
  // (ProcessInfo::attached_late); call before building memory profiles.
  void AccountAllocatedBeforeAttach();
  // Device memory |pid| held when gpuflame attached to it, as the driver
  // says (|driver_bytes|, NVML, summed over GPUs: device-level events do not
  // say which GPU): beyond the device-level bytes we count live for it now,
  // in use under kHeldBeforeAttachFrame (no object count, as above: the
  // driver gives none, and its context is no allocation). |lower_only|: a
  // later reading, which may lower the figure (memory from before was freed:
  // its free matched nothing) but never raise it (what the driver gained
  // since, its context growing, is not from before). Off the hot path.
  void AccountHeldBeforeAttach(pid_t pid, uint64_t driver_bytes, bool lower_only);
  // What stands under |pid|'s kHeldBeforeAttachFrame now (0: nothing).
  int64_t HeldBeforeAttach(pid_t pid);
  // The in-use bytes each of |pids| has now at |domain| (GF_DOMAIN_*),
  // before-attach markers included: one pass over the stacks.
  absl::flat_hash_map<uint32_t, int64_t> InUse(uint8_t domain, std::span<const pid_t> pids) const;
  // Reads BPF's loss maps and calls the two above: run when a process
  // exits, before its live set is dropped.
  void SetLossCollector(std::function<void()> collect) { collect_losses_ = std::move(collect); }
  const absl::flat_hash_map<uint32_t, ProcessLoss>& losses() const { return losses_; }

 private:
  void StartKey(const gf_event& ev, bool mixed);  // the key_ prefix both stack kinds share
  // The caching allocator's totals an event reports (arg0: device, arg1:
  // allocated, arg2: reserved), unless its process's live set has frozen.
  void UpdateTotals(const gf_event& ev);
  StackId InternStack(const gf_event& ev, std::span<const uint8_t> payload);
  // A record with registers and a stack copy: unwound first, interned by the
  // return addresses it yields (the stack bytes themselves never repeat).
  StackId InternMixedStack(const gf_event& ev, std::span<const uint8_t> payload);
  // A probe record's stack, whichever shape it has (raw, mixed, or with its
  // backward() caller's Python frames lent by BPF).
  StackId RecordStack(const gf_event& ev, std::span<const uint8_t> payload, bool mixed);
  // GF_EVF_BACKWARD_CALLER: the caller's Python frames, kAutogradFrame (or
  // the ambiguous marker), then this thread's own native frames if any.
  StackId LentStack(const gf_event& ev, std::span<const uint8_t> payload, bool mixed);

  // An allocation's stack, or a failed allocation's: the one its call's
  // entry sent (GF_EVF_STACK_AT_ENTRY), else the record's own.
  StackId AllocationStack(const gf_event& ev, std::span<const uint8_t> payload, bool mixed);
  // The stack an in-process record names by |id| (0: no Python frames; with
  // GF_EVF_AUTOGRAD the backward() caller's, below which the engine's work
  // goes; with GF_EVF_AUTOGRAD_AMBIGUOUS, |id| is how many calls ran).
  StackId InProcessStack(const gf_event& ev, uint64_t id);
  // PyTorch's out-of-memory report (a probe's or the library's), to the episodes.
  void OnTorchOomReport(const gf_event& ev, StackId stack);
  StackId OverBudgetStack(const gf_event& ev);
  // A record with a stack ID in place of its frames, or frames and their ID
  // (gpuflame_abi.h, struct gf_stack_id): |ev| and |body| become what a
  // record with the frames inline would be. False: malformed.
  bool ExpandStackId(gf_event& ev, std::span<const uint8_t>& body);
  StackId LostStack(uint32_t pid, uint8_t domain);
  void ProcessExited(pid_t pid, uint64_t ts_ns);
  // One stack per process and domain holding only a marker frame.
  StackId MarkerStack(const gf_event& ev, const char* marker);
  // That stack if it exists (kNone if not, or retired with its process).
  StackId FindMarker(const gf_event& ev, const char* marker);
  // libgpuflame_cupti.so's batch of in-process tensor events (gpuflame_abi.h).
  void OnTensorBatch(const gf_event& outer, std::span<const uint8_t> payload);
  void OnInProcessRecord(const gf_event& ev, std::span<const uint8_t> payload);
  // The stack of work autograd's engine threads did for a backward() call:
  // |origin|'s frames (the caller's Python stack, its API leaf dropped), the
  // |marker| frame, then |tail|'s frames, or with kNone the event's API leaf.
  // |origin| kNone: the marker stands alone above the tail.
  // Allocation-free for a stack seen before (the common case: one per caller).
  StackId AutogradStack(const gf_event& ev, StackId origin, std::string_view marker, StackId tail);
  // A launch from a thread without Python frames that names a backward()
  // call (arg2) or several (size): its stack below the caller's.
  StackId AutogradLaunchStack(const gf_event& ev, StackId own);
  // A tensor event from a probe, for a process whose in-process hook has
  // taken over since: dropped (counted), never counted twice.
  bool SupersededByInProcess(const gf_event& ev);
  uint32_t ThreadLabel(const gf_event& ev);
  void OnGpuRecord(const gf_event& ev, std::span<const uint8_t> payload);
  // GF_EV_IO: to the timeline, if any (io_record.h).
  void OnIo(const gf_event& ev, std::span<const uint8_t> body);
  void OnLibCost(const gf_event& ev);
  // A launch's stack and CUPTI's correlation ID, however they met (the
  // library's callback, or the launch route's join): the kernel join, NCCL's
  // and the timeline's.
  // |late|: joined by the launch route, a flush after the launch.
  void OnLaunchStack(pid_t pid, uint32_t tid, uint32_t correlation, uint32_t api, StackId stack, uint64_t ts_ns,
                     bool late = false);
  // To the timeline, if on: an allocation or free that moved |pid|'s in
  // use at |domain| from |before| (a free that moved nothing is left out).
  void TimelineMemory(const gf_event& ev, uint8_t domain, StackId stack, int64_t before);
  int64_t InUseIfTimeline(const gf_event& ev, uint8_t domain) const {
    return timeline_ ? tracker_.InUse(static_cast<pid_t>(ev.pid), domain) : 0;
  }
  // Before attach, both levels: adds to each process in |in_use| the in-use
  // bytes of its stacks in |domain| (its before-attach marker's included).
  void AddInUse(uint8_t domain, absl::flat_hash_map<uint32_t, int64_t>& in_use) const;

  ProcessRegistry* registry_;
  StackResolver& resolver_;
  NativeUnwinder* unwinder_;
  AllocationTracker tracker_;
  StackTable stacks_;
  FrameTable frames_;
  ProcessorStats stats_;
  absl::flat_hash_map<uint32_t, AllocatorTotals> totals_;
  OomEpisodes oom_{stacks_, tracker_};
  NcclTracker nccl_;
  static constexpr uint8_t kKinds = 48;
  uint64_t by_kind_[kKinds] = {};
  std::string key_;  // reused buffer for raw-stack keys
  // Per thread: the stack sent at the entry of its allocation call in flight.
  absl::flat_hash_map<uint32_t, StackId> entry_stacks_;
  TimeTracker cpu_;
  TimeTracker kernels_;
  KernelJoiner joiner_{stacks_, frames_, kernels_};
  LaunchRouteJoiner route_;  // the launch route's hits to their records (then joiner_)
  uint64_t newest_ts_ns_ = 0;  // the latest record header's time handled (ExpireLaunchHits)
  int64_t cpu_period_ns_ = 1'000'000'000 / 97;
  bool thread_names_ = false;
  bool frozen_ = false;
  timeline::Timeline* timeline_ = nullptr;
  utilization::Utilization* utilization_ = nullptr;
  absl::flat_hash_map<uint64_t, uint32_t> thread_labels_;  // pid << 32 | tid -> label
  std::vector<gf_kernel_record> batch_;                    // reused for every activity batch
  std::vector<gf_api_record> api_batch_;                   // reused for every API or launch record batch
  absl::flat_hash_set<uint32_t> foreign_abi_;              // pids whose library speaks another ABI
  absl::flat_hash_map<pid_t, uint64_t> launch_records_unconverted_;  // each library's last count
  LibraryCost library_cost_;
  absl::flat_hash_map<uint64_t, gf_loss> losses_seen_;  // pid << 16 | domain << 8 | kind -> last total
  absl::flat_hash_map<uint32_t, ProcessLoss> losses_;
  std::function<void()> collect_losses_;
  // pid -> its kBeforeAttachFrame stack, and its kBeforeAttachEstimateFrame one
  absl::flat_hash_map<uint32_t, StackId> before_attach_stacks_, before_attach_estimate_stacks_;
  struct PidCost {
    LibraryCost cost;  // its last report
    uint64_t ts_ns = 0;
  };
  absl::flat_hash_map<uint32_t, PidCost> library_cost_by_pid_;
  // In-process tensor events: the stacks each process sent, by its IDs, and
  // since when its hook is live.
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, StackId> inprocess_stacks_;
  absl::flat_hash_map<uint32_t, uint64_t> inprocess_since_;
  // Processes whose tensor allocations the probes have sampled at some
  // point (past their start-up, or GF_SHED_TENSOR_SAMPLED): once the
  // guardrails step back, the frees of blocks not taken come unflagged, and
  // are still no allocation made before gpuflame attached.
  absl::flat_hash_set<uint32_t> probe_sampled_;
  KernelStackIds kernel_stacks_;
  bool stack_unknown_ = false;  // the record being handled named a stack ID not kept
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PIPELINE_EVENT_PROCESSOR_H_
