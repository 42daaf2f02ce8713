// NcclTracker's GPU-side hangs (nccl_tracker.h): on a GPU an NCCL
// collective or send/receive returns once enqueued on its stream, so a peer
// that never joins leaves the caller's stream stuck, and the thread stuck in
// its next synchronise call. BPF sends the entry of each synchronise call of
// a process that has issued NCCL calls (GF_EV_CUDA_SYNC_ENTER); one still
// outstanding past the threshold is a hang, blamed on the process's recent
// NCCL calls: the first, in the order issued, whose matching call a rank has
// not entered (a stream runs its work in order, so that one holds the rest).
// Calls on the stream waited for come first; a synchronise call on another
// stream (PyTorch's compute stream waits for its NCCL stream through an
// event), on an event (whose stream is not known) or on the whole device
// looks at every stream's.
#include <algorithm>
#include <tuple>

#include "bpf/gpuflame_abi.h"
#include "profiler/collectives/nccl_api.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {

void NcclTracker::Remember(const NcclCall& call, uint64_t sequence) {
  std::deque<Issued>* recent = nullptr;
  if (auto it = recent_.find(call.pid); it != recent_.end()) {
    recent = &it->second;
  } else {
    if (recent_.size() >= kMaxRecentProcesses) {
      stats_.dropped_recent_processes++;  // its synchronise calls cannot be hangs
      return;
    }
    recent = &recent_[call.pid];
  }
  if (recent->size() >= kMaxRecentCalls) recent->pop_front();
  recent->push_back({call, sequence});
}

void NcclTracker::OnSyncEnter(const NcclSyncCall& call) {
  stats_.sync_entries++;
  const ThreadKey key{call.pid, call.tid};
  auto it = syncs_.find(key);
  if (it == syncs_.end() && syncs_.size() >= kMaxInFlight) {
    stats_.dropped_syncs++;
    return;
  }
  // A thread waits in one synchronise call at a time (BPF folds the
  // driver's into the runtime's): one still here lost its return.
  if (it != syncs_.end()) {
    Close(it->second.hang, call.ts_ns, NcclHang::Outcome::kReturned, 0);
    it->second = SyncInFlight{call};
  } else {
    syncs_.emplace(key, SyncInFlight{call});
  }
}

void NcclTracker::OnSyncReturn(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t result) {
  auto it = syncs_.find(ThreadKey{pid, tid});
  if (it == syncs_.end()) return;  // not an NCCL process's (the common case), or attached mid-call
  Close(it->second.hang, ts_ns, NcclHang::Outcome::kReturned, result);
  syncs_.erase(it);
}

void NcclTracker::EndSyncs(pid_t pid, uint64_t ts_ns) {
  for (auto it = syncs_.begin(); it != syncs_.end();) {
    if (it->first.first != pid) {
      ++it;
      continue;
    }
    Close(it->second.hang, ts_ns, NcclHang::Outcome::kProcessEnded, 0);
    syncs_.erase(it++);
  }
  recent_.erase(pid);
}

void NcclTracker::TickSyncs(uint64_t now_ns) {
  for (auto& [key, s] : syncs_) {
    if (s.hang != kNoHang || now_ns < s.call.ts_ns || now_ns - s.call.ts_ns < threshold_ns_) continue;
    auto recent = recent_.find(s.call.pid);
    // No collective or send/receive of this process seen (its NCCL calls
    // came before gpuflame, or were only init): nothing to blame; asked
    // again next tick.
    if (recent == recent_.end() || recent->second.empty()) continue;
    s.hang = NewHang(NcclHang::Side::kGpu);
    if (s.hang == kHangNotKept) continue;
    NcclHang h = GpuHang(s, recent->second);
    h.found_ns = now_ns;
    found_.push_back(h.number);
    hangs_.emplace(h.number, std::move(h));
  }
}

NcclHang NcclTracker::GpuHang(const SyncInFlight& s, const std::deque<Issued>& recent) const {
  const bool on_stream = s.call.api == GF_API_CUDA_STREAM_SYNC || s.call.api == GF_API_CU_STREAM_SYNC;
  const bool any_on_stream = on_stream && std::any_of(recent.begin(), recent.end(),
                                                      [&](const Issued& i) { return i.call.stream == s.call.object; });
  const Issued* blamed = nullptr;
  std::vector<NcclAbsentRank> absent;
  uint32_t unmatched = 0;
  for (const Issued& i : recent) {
    if (any_on_stream && i.call.stream != s.call.object) continue;
    std::vector<NcclAbsentRank> missing;
    Absent(i.call, i.sequence, missing);
    if (missing.empty()) {
      if (!blamed || absent.empty()) blamed = &i;  // the last matched, until one is not
      continue;
    }
    unmatched++;
    if (absent.empty()) {  // the first not matched holds its stream
      blamed = &i;
      absent = std::move(missing);
    }
  }
  NcclHang h;
  h.number = s.hang;
  h.side = NcclHang::Side::kGpu;
  h.pid = s.call.pid;
  h.tid = s.call.tid;
  h.start_ns = s.call.ts_ns;
  h.sync_api = s.call.api;
  h.sync_object = s.call.object;
  h.sync_stack = s.call.stack;
  h.same_stream = any_on_stream;
  h.unmatched_calls = unmatched;
  if (!blamed) return h;  // none considered (not reached: recent is not empty)
  const NcclCall& c = blamed->call;
  h.api = c.api;
  h.comm = c.comm;
  if (auto id = comm_ids_.find(std::pair{c.pid, c.comm}); id != comm_ids_.end()) h.comm_id = id->second;
  std::tie(h.rank, h.nranks) = RankOf(c.pid, c.comm);
  h.peer = c.peer;
  h.count = c.count;
  h.datatype = c.datatype;
  h.op = c.op;
  h.stream = c.stream;
  h.sequence = blamed->sequence;
  h.bytes = NcclCallBytes(c.api, c.count, c.datatype).value_or(0);
  h.stack = c.stack;
  h.call_tid = c.tid;
  h.call_ns = c.ts_ns;
  h.absent = std::move(absent);
  std::sort(h.absent.begin(), h.absent.end(),
            [](const NcclAbsentRank& a, const NcclAbsentRank& b) { return a.rank < b.rank; });
  return h;
}

}  // namespace gpuflame::profiler
