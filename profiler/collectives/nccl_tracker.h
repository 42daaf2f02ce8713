// Every NCCL call of the followed processes (GF_EV_NCCL_CALL / _DONE,
// bpf/nccl_calls.bpf.h), accounted three ways:
//  - time, calls and bytes per stack (the `nccl` profile: nccl_report.h);
//  - communicators: ncclCommInitRank tells each process's communicator its
//    rank, size and the hash of its ncclUniqueId, which joins the ranks of
//    one communicator across the processes this gpuflame follows;
//  - hangs: a call outstanding longer than the threshold is a hang, taken
//    while it is still stuck (Take), with the ranks of its communicator
//    that have not entered the matching call, and closed when it returns
//    (its duration) or its process ends.
// Matching is by order, as NCCL's own: the n-th collective of a rank on a
// communicator matches every other rank's n-th; a rank's n-th ncclSend to a
// peer matches that peer's n-th ncclRecv from it. Calls inside
// ncclGroupStart/End count when entered (NCCL starts them at the group's
// end, where a grouped hang blocks: that ncclGroupEnd carries them).
//
// Entry-to-return time is what the CPU thread spent in the call. NCCL's
// collectives return once enqueued on the stream, so on a GPU a stuck
// collective shows as a stuck stream, not a stuck call; calls that do block
// on the CPU (communicator init, a blocking group end, a non-blocking
// communicator polled) are seen here. The stuck stream is seen through the
// synchronise calls of processes that issued NCCL calls (BPF sends their
// entry: GF_EV_CUDA_SYNC_ENTER): one outstanding past the threshold is a
// GPU-side hang (nccl_sync_waits.cc), blamed on the first of the process's
// recent NCCL calls (on the stream waited for, where it issued any there)
// whose matching call a rank has not entered.
//
// GPU time (nccl_gpu_time.cc): a kernel launched on a thread while it is
// inside a collective, a send/receive or ncclGroupEnd is that call's
// (GF_EV_KERNEL_LAUNCH, whose correlation ID the injection library takes
// for every NCCL kernel while CUPTI activity is on: bpf/nccl_kernel_name.h);
// the GPU time of the kernel records with that correlation ID goes to the
// call's stack and operation. A group's kernels launch at its ncclGroupEnd
// (NCCL fuses the group's operations into shared kernels), so they are
// charged to the ncclGroupEnd call: its stack, operation ncclGroupEnd, and
// the bytes of the group's calls; splitting a fused kernel's time among
// them would be a guess. A kernel whose launch was not joined (launched
// outside an NCCL call: a non-blocking communicator's launch thread, a CUDA
// graph; or not taken) is counted by its NCCL name, never guessed.
//
// Hangs are kept by number. record keeps them all (up to kMaxHangs) for its
// report; the agent, which runs for months, forgets each once its end has
// been taken (ForgetEndedHangs), so kMaxHangs bounds the hangs stuck at once.
//
// Everything is bounded: communicators, ranks and in-flight calls per
// process, calls of a group; what did not fit is counted (stats()).
// Worker thread only (EventProcessor), as the rest of the pipeline's state.
#ifndef GPUFLAME_PROFILER_COLLECTIVES_NCCL_TRACKER_H_
#define GPUFLAME_PROFILER_COLLECTIVES_NCCL_TRACKER_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/collectives/nccl_comm_id.h"
#include "profiler/collectives/nccl_steps.h"
#include "profiler/collectives/nccl_stragglers.h"
#include "profiler/resolve/stack_table.h"

namespace gpuflame::profiler {

// One GF_EV_NCCL_CALL, decoded.
struct NcclCall {
  pid_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
  uint16_t api = 0;
  uint64_t comm = 0;      // ncclComm_t (0: none; init: not known yet)
  uint64_t count = 0;     // elements; init: nranks
  uint32_t datatype = 0;  // GF_NCCL_NO_OP: none
  uint32_t op = 0;        // reduction op; GF_NCCL_NO_OP: none
  int32_t peer = -1;      // send/recv: peer; broadcast: root; init: rank
  uint64_t stream = 0;
  uint64_t id_lo = 0, id_hi = 0;  // init: the ncclUniqueId's hash
  StackId stack = StackTable::kNone;
};

// A synchronise call entered in a process that has issued NCCL calls
// (GF_EV_CUDA_SYNC_ENTER), decoded.
struct NcclSyncCall {
  pid_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;
  uint16_t api = 0;     // GF_API_IS_CUDA_SYNC
  uint64_t object = 0;  // the stream or event waited for (0: device or context)
  StackId stack = StackTable::kNone;
};

// A rank of a communicator that has not entered the call another waits in.
struct NcclAbsentRank {
  int rank = -1;
  pid_t pid = 0;         // 0: no process this gpuflame follows has that rank (another node, or not started)
  uint64_t entered = 0;  // matching calls it has entered so far
};

// What a user would expect before calling a call stuck: far longer than any
// enqueue (microseconds) or a healthy step's wait, long enough for a slow
// communicator init across a node (seconds), and well under the watchdogs
// that end the job (PyTorch's ProcessGroupNCCL: 10 minutes by default).
inline constexpr double kDefaultNcclHangSeconds = 10.0;

// A call stuck past the threshold: what it is, who it waits for.
struct NcclHang {
  uint64_t number = 0;  // 1, 2, ... in the order found
  // Where the thread is stuck: in the NCCL call (kCall), or (kGpu) in a
  // synchronise call after the process's NCCL calls returned, enqueued: the
  // GPU waits, and the thread with it. For kGpu, tid and start_ns are the
  // synchronise call's, and the NCCL fields below describe the call blamed.
  enum class Side { kCall, kGpu } side = Side::kCall;
  pid_t pid = 0;
  uint32_t tid = 0;
  uint16_t api = 0;
  uint64_t comm = 0;
  std::optional<NcclCommId> comm_id;  // none: its communicator's init was not seen
  int rank = -1, nranks = 0;          // -1 / 0: not known
  int32_t peer = -1;                  // send/recv peer, broadcast root
  uint64_t bytes = 0;
  uint64_t count = 0;
  uint32_t datatype = 0;
  uint32_t op = 0;        // reduction op (GF_NCCL_NO_OP: none)
  uint64_t stream = 0;    // the CUDA stream it was issued on
  uint64_t sequence = 0;  // its ordinal among the matching calls (1: the first)
  uint64_t start_ns = 0;  // entry, CLOCK_MONOTONIC
  uint64_t found_ns = 0;  // when it was found stuck
  StackId stack = StackTable::kNone;
  std::vector<uint16_t> grouped;  // ncclGroupEnd: the calls of its group (api), in order
  std::vector<NcclAbsentRank> absent;
  // kGpu: the synchronise call, and the NCCL call blamed (the first of the
  // process's recent ones, on the stream waited for where there are any,
  // that a rank has not matched; else its last).
  uint16_t sync_api = 0;
  uint64_t sync_object = 0;  // stream or event (0: device or context)
  StackId sync_stack = StackTable::kNone;
  uint32_t call_tid = 0;
  uint64_t call_ns = 0;          // the blamed call's entry
  bool same_stream = false;      // it was issued on the stream waited for
  uint32_t unmatched_calls = 0;  // of the recent calls considered, those a rank has not matched
  // How it ended: returned (with the call's result: ncclResult_t, or for
  // kGpu the synchronise call's cudaError_t / CUresult), its process ended,
  // or its thread ended inside the call while the process lived on.
  enum class Outcome { kStuck, kReturned, kProcessEnded, kThreadEnded } outcome = Outcome::kStuck;
  uint64_t end_ns = 0;
  uint32_t result = 0;
};

// Per stack: what the profile shows.
struct NcclStackTotals {
  uint64_t calls = 0;
  uint64_t nanos = 0;
  uint64_t bytes = 0;
  uint64_t gpu_nanos = 0;  // its kernels' GPU time (CUPTI activity, weighted), where joined
};

// Per operation: what its kernels took on the GPU, and what that moved.
struct NcclGpuTotals {
  uint64_t calls = 0;      // calls whose kernels' records came (weighted)
  uint64_t nanos = 0;      // their GPU time
  uint64_t bytes = 0;      // the bytes those calls named
  uint64_t bus_bytes = 0;  // in bus-bandwidth terms (NcclBusBytes), where known
  uint64_t bus_nanos = 0;  // the GPU time of the calls whose bus bytes are known
};

struct NcclRank {
  int rank = -1;
  pid_t pid = 0;
  uint64_t comm = 0;         // its ncclComm_t (0 until its init returned)
  bool ready = false;        // its init returned successfully
  uint64_t collectives = 0;  // entered so far
  absl::flat_hash_map<int, uint64_t> sends_to, recvs_from;
};

struct NcclCommunicator {
  NcclCommId id;
  int nranks = 0;
  absl::flat_hash_map<int, NcclRank> ranks;
};

struct NcclStats {
  uint64_t calls = 0;
  uint64_t returns = 0;
  uint64_t returns_without_call = 0;        // the entry was not seen (attached mid-call, lost)
  uint64_t calls_without_return = 0;        // the thread's next call came first: its return was lost
  uint64_t failed_calls = 0;                // returned something other than ncclSuccess
  uint64_t unknown_communicator_calls = 0;  // on a communicator whose init was not seen
  uint64_t unknown_datatypes = 0;           // bytes not counted
  uint64_t dropped_communicators = 0;       // over kMaxCommunicators
  uint64_t dropped_ranks = 0;               // implausible rank/nranks, or over the bound
  uint64_t dropped_group_calls = 0;         // past kMaxGroupCalls in one group
  uint64_t dropped_in_flight = 0;           // over kMaxInFlight
  uint64_t hangs = 0;                       // found, both sides
  uint64_t gpu_hangs = 0;                   // of which in a synchronise call (NcclHang::Side::kGpu)
  uint64_t hangs_not_kept = 0;              // found while kMaxHangs were held: counted, not said
  uint64_t unfinished = 0;                  // still in flight when recording ended
  uint64_t sync_entries = 0;                // synchronise calls entered in NCCL processes
  uint64_t dropped_syncs = 0;               // over kMaxInFlight
  uint64_t dropped_recent_processes = 0;    // NCCL calls of processes over kMaxRecentProcesses not kept
  uint64_t ended_with_thread = 0;           // NCCL and synchronise calls whose thread ended inside them
  // GPU time (nccl_gpu_time.cc).
  uint64_t gpu_launches = 0;                 // kernel launches inside collectives, sends/receives, group ends
  uint64_t gpu_launches_other_calls = 0;     // inside other NCCL calls (init, destroy): not charged
  uint64_t dropped_gpu_launches = 0;         // over kMaxGpuLaunches waiting for their records
  uint64_t gpu_launches_without_record = 0;  // no record came (activity off, process ended, too old)
  uint64_t gpu_launches_replaced = 0;        // a later launch of the same (pid, correlation ID) took its place
  uint64_t gpu_records = 0;                  // kernel records joined to a call
  uint64_t gpu_records_not_joined = 0;       // NCCL kernels whose launch was not joined to a call
  uint64_t gpu_nanos_not_joined = 0;         // their GPU time (weighted): counted, charged to no call
  uint64_t dropped_kernel_names = 0;         // NCCL kernel names over kMaxNcclKernelNames
};

class NcclTracker {
 public:
  static constexpr size_t kMaxCommunicators = 4096;
  static constexpr int kMaxRanks = 65536;            // of one communicator
  static constexpr size_t kMaxTrackedRanks = 65536;  // of all communicators together
  static constexpr size_t kMaxGroupCalls = 64;
  static constexpr size_t kMaxInFlight = 65536;
  static constexpr size_t kMaxHangs = 1024;      // held at once
  static constexpr size_t kMaxRecentCalls = 32;  // per process, for GPU-side hangs
  static constexpr size_t kMaxRecentProcesses = 4096;
  static constexpr size_t kMaxGpuLaunches = 65536;             // launches waiting for their records
  static constexpr size_t kMaxNcclKernelNames = 65536;         // (pid, name ID) of NCCL kernels
  static constexpr uint64_t kGpuLaunchTtlNs = 30'000'000'000;  // CUPTI flushes within seconds

  explicit NcclTracker(uint64_t hang_threshold_ns = 10'000'000'000ull) : threshold_ns_(hang_threshold_ns) {}
  void SetHangThreshold(uint64_t ns) { threshold_ns_ = ns; }
  uint64_t hang_threshold_ns() const { return threshold_ns_; }

  void OnCall(const NcclCall& call);
  // GPU time (nccl_gpu_time.cc): a launch whose stack was taken (its
  // thread may be inside an NCCL call), a kernel's name, and GPU activity
  // records (kernels; other kinds are skipped).
  void OnLaunch(pid_t pid, uint32_t tid, uint32_t correlation, uint64_t ts_ns);
  // The launch route's two halves of one launch: its hit, at |ts_ns|, in
  // order with the NCCL calls' entries and returns (the call in flight on
  // its thread then is the one it was made in), and, a flush later, the
  // same hit joined to its correlation ID.
  void OnLaunchHit(pid_t pid, uint32_t tid, uint64_t ts_ns);
  void OnLaunchJoined(pid_t pid, uint32_t tid, uint32_t correlation, uint64_t ts_ns);
  void OnKernelName(pid_t pid, uint32_t name_id, std::string_view name);
  void OnGpuRecords(pid_t pid, std::span<const gf_kernel_record> records);
  // A CPU sample: kept for the stragglers' "what it was doing" where the
  // process holds a rank.
  void OnCpuSample(pid_t pid, uint64_t ts_ns, StackId stack) {
    if (stragglers_.Wants(pid)) stragglers_.OnCpuSample(pid, ts_ns, stack);
  }
  // |comm|: what an init call wrote (0 otherwise); |result|: ncclResult_t.
  void OnReturn(pid_t pid, uint32_t tid, uint64_t ts_ns, uint64_t comm, uint32_t result);
  // Calls outstanding past the threshold at |now_ns| become hangs.
  void Tick(uint64_t now_ns);
  // The process is gone: its calls end with it; its communicators' ranks stay
  // (their counts still say what it had entered).
  void OnProcessExit(pid_t pid, uint64_t ts_ns);
  // A synchronise call entered, and its return (any synchronise call's:
  // those without an entry here are not NCCL processes' and are ignored).
  void OnSyncEnter(const NcclSyncCall& call);
  void OnSyncReturn(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t result);
  // The thread ended inside its calls while its process lives on
  // (GF_EV_THREAD_ENDED; |which|: GF_ENDED_* bits): they end there.
  void OnThreadEnded(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t which);
  // From now on a hang is forgotten once TakeEnded has handed it out.
  void ForgetEndedHangs() { forget_ended_ = true; }
  // Recording ends: calls still in flight are charged up to |now_ns|.
  void Finish(uint64_t now_ns);
  // Stacks about to be reused for others: their totals go.
  void ForgetStacks(const std::vector<StackId>& stacks);
  // Processes retired for good (the agent, between windows): their ranks go,
  // and communicators left without a rank, so that a long-running agent's
  // table holds the jobs running now, not every job it ever saw.
  void ForgetProcesses(std::span<const pid_t> pids);

  // Hangs found since the last call (still stuck), and hangs that ended
  // since the last call, each said once.
  std::vector<NcclHang> TakeFound();
  std::vector<NcclHang> TakeEnded();

  // By number: every hang found and kept (record), or those not yet over
  // and taken (after ForgetEndedHangs).
  const absl::btree_map<uint64_t, NcclHang>& hangs() const { return hangs_; }
  const absl::flat_hash_map<StackId, NcclStackTotals>& totals() const { return totals_; }
  // The same per API (index: api - GF_API_NCCL_ALL_REDUCE), kept when stacks go.
  static constexpr size_t kApis = 13;
  const std::array<NcclStackTotals, kApis>& by_api() const { return by_api_; }
  const std::array<NcclGpuTotals, kApis>& gpu_by_api() const { return gpu_by_api_; }
  const absl::flat_hash_map<NcclCommId, NcclCommunicator>& communicators() const { return comms_; }
  // The rank a process's communicator has (-1: not known).
  std::pair<int, int> RankOf(pid_t pid, uint64_t comm) const;
  const NcclStats& stats() const { return stats_; }
  const NcclStragglers& stragglers() const { return stragglers_; }
  // Stragglers per step (nccl_steps.h): record's alone.
  void EnableSteps() { steps_.Enable(); }
  const NcclSteps& steps() const { return steps_; }

 private:
  static constexpr uint64_t kNoHang = 0;
  static constexpr uint64_t kHangNotKept = UINT64_MAX;  // counted, not kept
  struct InFlight {
    NcclCall call;
    std::optional<NcclCommId> comm_id;
    uint64_t sequence = 0;
    std::vector<std::pair<NcclCall, uint64_t>> grouped;  // ncclGroupEnd: its group's calls, with their ordinals
    uint64_t hang = kNoHang;                             // its hang's number once found stuck
    uint32_t launches = 0;                               // kernel launches joined to it
  };
  struct SyncInFlight {
    NcclSyncCall call;
    uint64_t hang = kNoHang;
  };
  // A collective or send/receive a process issued, with its ordinal.
  struct Issued {
    NcclCall call;
    uint64_t sequence = 0;
  };
  struct Group {
    int depth = 0;
    std::vector<std::pair<NcclCall, uint64_t>> calls;
  };
  using ThreadKey = std::pair<pid_t, uint32_t>;

  NcclCommunicator* CommunicatorOf(pid_t pid, uint64_t comm, NcclRank** rank);
  // Counts |call| as entered by its rank; returns its ordinal.
  uint64_t Enter(const NcclCall& call, std::optional<NcclCommId>* id);
  void Absent(const NcclCall& call, uint64_t sequence, std::vector<NcclAbsentRank>& out) const;
  // A new hang's number, or kHangNotKept when kMaxHangs are held (counted).
  uint64_t NewHang(NcclHang::Side side);
  void Close(uint64_t hang, uint64_t end_ns, NcclHang::Outcome outcome, uint32_t result);
  void Charge(const NcclCall& c, uint64_t end_ns, uint64_t bytes);
  // nccl_sync_waits.cc: GPU-side hangs.
  void Remember(const NcclCall& call, uint64_t sequence);
  void TickSyncs(uint64_t now_ns);
  NcclHang GpuHang(const SyncInFlight& s, const std::deque<Issued>& recent) const;
  void EndSyncs(pid_t pid, uint64_t ts_ns);
  // nccl_gpu_time.cc: a kernel launch waiting for its records.
  struct GpuLaunch {
    StackId stack = StackTable::kNone;
    uint16_t api = 0;
    bool first = false;  // the call's first launch: it carries the call's bytes
    bool bus_known = false;
    uint64_t bytes = 0, bus_bytes = 0;
    uint64_t ts_ns = 0;
  };
  using PidKey = std::pair<pid_t, uint32_t>;
  using HitKey = std::tuple<pid_t, uint32_t, uint64_t>;  // (pid, thread, the hit's time)
  // The launch inside the NCCL call in flight on |tid|, if any and if
  // there is room for it (in route_hits_ for a |hit|, else gpu_launches_).
  std::optional<GpuLaunch> LaunchInCall(pid_t pid, uint32_t tid, uint64_t ts_ns, bool hit);
  void ExpireGpuLaunches(uint64_t now_ns);
  void ForgetGpuProcess(pid_t pid);

  uint64_t threshold_ns_;
  absl::flat_hash_map<NcclCommId, NcclCommunicator> comms_;
  size_t tracked_ranks_ = 0;                                              // the ranks of every communicator in comms_
  absl::flat_hash_map<std::pair<pid_t, uint64_t>, NcclCommId> comm_ids_;  // (pid, ncclComm_t)
  absl::flat_hash_map<ThreadKey, InFlight> in_flight_;
  absl::flat_hash_map<ThreadKey, Group> groups_;
  absl::flat_hash_map<StackId, NcclStackTotals> totals_;
  std::array<NcclStackTotals, kApis> by_api_{};
  absl::flat_hash_map<ThreadKey, SyncInFlight> syncs_;
  absl::flat_hash_map<pid_t, std::deque<Issued>> recent_;  // the last kMaxRecentCalls of each process
  absl::btree_map<uint64_t, NcclHang> hangs_;
  uint64_t last_hang_ = 0;
  bool forget_ended_ = false;
  std::vector<uint64_t> found_, ended_;  // numbers not yet taken
  absl::flat_hash_map<PidKey, GpuLaunch> gpu_launches_;  // (pid, correlation ID)
  absl::flat_hash_map<HitKey, GpuLaunch> route_hits_;    // waiting for their correlation IDs
  absl::flat_hash_set<PidKey> nccl_kernel_names_;        // (pid, name ID)
  std::array<NcclGpuTotals, kApis> gpu_by_api_{};
  uint64_t last_gpu_sweep_ns_ = 0;
  NcclStats stats_;
  NcclStragglers stragglers_;
  NcclSteps steps_;
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_COLLECTIVES_NCCL_TRACKER_H_
