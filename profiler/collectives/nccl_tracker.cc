#include "profiler/collectives/nccl_tracker.h"

#include <algorithm>

#include "bpf/gpuflame_abi.h"
#include "profiler/collectives/nccl_api.h"

namespace gpuflame::profiler {
namespace {

// Bytes a call names: its count of elements of its type (all-gather: each
// rank's contribution; reduce-scatter: each rank's result), 0 where unknown.
uint64_t CallBytes(const NcclCall& c, NcclStats& stats) {
  std::optional<uint64_t> bytes = NcclCallBytes(c.api, c.count, c.datatype);
  if (!bytes) stats.unknown_datatypes++;
  return bytes.value_or(0);
}

uint64_t CallBytesQuiet(const NcclCall& c) {
  NcclStats ignored;
  return CallBytes(c, ignored);
}

}  // namespace

NcclCommunicator* NcclTracker::CommunicatorOf(pid_t pid, uint64_t comm, NcclRank** rank) {
  auto id = comm_ids_.find(std::pair{pid, comm});
  if (id == comm_ids_.end()) return nullptr;
  auto c = comms_.find(id->second);
  if (c == comms_.end()) return nullptr;
  for (auto& [r, state] : c->second.ranks)
    if (state.pid == pid && state.comm == comm) {
      *rank = &state;
      return &c->second;
    }
  return nullptr;
}

uint64_t NcclTracker::Enter(const NcclCall& call, std::optional<NcclCommId>* id) {
  if (GF_API_IS_NCCL_INIT(call.api)) {
    if (call.id_lo == 0 && call.id_hi == 0) return 0;  // the unique ID was unreadable
    const NcclCommId key{call.id_lo, call.id_hi};
    const auto nranks = static_cast<int64_t>(call.count);
    if (nranks <= 0 || nranks > kMaxRanks || call.peer < 0 || call.peer >= nranks) {
      stats_.dropped_ranks++;
      return 0;
    }
    auto it = comms_.find(key);
    if (it == comms_.end()) {
      if (comms_.size() >= kMaxCommunicators) {
        stats_.dropped_communicators++;
        return 0;
      }
      it = comms_.emplace(key, NcclCommunicator{key, static_cast<int>(nranks), {}}).first;
    }
    if (!it->second.ranks.contains(call.peer)) {
      if (tracked_ranks_ >= kMaxTrackedRanks) {
        stats_.dropped_ranks++;
        return 0;
      }
      tracked_ranks_++;
    }
    NcclRank& r = it->second.ranks[call.peer];
    r = NcclRank{};
    r.rank = call.peer;
    r.pid = call.pid;
    *id = key;
    stragglers_.OnRankProcess(call.pid);
    return 1;
  }
  if (!IsNcclCollective(call.api) && !IsNcclPointToPoint(call.api)) return 0;
  NcclRank* rank = nullptr;
  NcclCommunicator* comm = CommunicatorOf(call.pid, call.comm, &rank);
  if (!comm) {
    stats_.unknown_communicator_calls++;
    return 0;
  }
  *id = comm->id;
  if (IsNcclCollective(call.api)) {
    const uint64_t sequence = ++rank->collectives;
    stragglers_.OnCollective(comm->id, comm->nranks, static_cast<int>(comm->ranks.size()), rank->rank, call.pid,
                             sequence, call.ts_ns, call.stack);
    steps_.OnCollective(comm->id, comm->nranks, rank->rank, call.pid, sequence, call.ts_ns, call.stack);
    return sequence;
  }
  if (call.peer < 0 || call.peer >= comm->nranks) return 0;
  auto& counts = call.api == GF_API_NCCL_SEND ? rank->sends_to : rank->recvs_from;
  return ++counts[call.peer];
}

void NcclTracker::OnCall(const NcclCall& call) {
  stats_.calls++;
  const ThreadKey key{call.pid, call.tid};
  InFlight f;
  f.call = call;
  f.sequence = Enter(call, &f.comm_id);
  if (call.api == GF_API_NCCL_GROUP_START) {
    groups_[key].depth++;
  } else if (call.api == GF_API_NCCL_GROUP_END) {
    if (auto g = groups_.find(key); g != groups_.end()) {
      if (--g->second.depth <= 0) {
        f.grouped = std::move(g->second.calls);
        groups_.erase(g);
      }
    }
  } else if (IsNcclCollective(call.api) || IsNcclPointToPoint(call.api)) {
    if (auto g = groups_.find(key); g != groups_.end()) {
      if (g->second.calls.size() < kMaxGroupCalls) g->second.calls.emplace_back(call, f.sequence);
      else stats_.dropped_group_calls++;
    }
    Remember(call, f.sequence);
  }
  auto it = in_flight_.find(key);
  if (it == in_flight_.end() && in_flight_.size() >= kMaxInFlight) {
    stats_.dropped_in_flight++;
    return;
  }
  // A thread has one NCCL call at a time (BPF folds nested ones into the
  // outermost): one already here lost its return.
  if (it != in_flight_.end()) {
    stats_.calls_without_return++;
    Charge(it->second.call, call.ts_ns, CallBytesQuiet(it->second.call));  // it ended by then
    Close(it->second.hang, call.ts_ns, NcclHang::Outcome::kReturned, 0);
    it->second = std::move(f);
  } else {
    in_flight_.emplace(key, std::move(f));
  }
}

void NcclTracker::OnReturn(pid_t pid, uint32_t tid, uint64_t ts_ns, uint64_t comm, uint32_t result) {
  auto it = in_flight_.find(ThreadKey{pid, tid});
  if (it == in_flight_.end()) {
    stats_.returns_without_call++;
    return;
  }
  InFlight& f = it->second;
  stats_.returns++;
  if (result != 0) stats_.failed_calls++;
  const NcclCall& c = f.call;
  if (GF_API_IS_NCCL_INIT(c.api) && f.comm_id && result == 0 && comm != 0) {
    if (auto cm = comms_.find(*f.comm_id); cm != comms_.end()) {
      if (auto r = cm->second.ranks.find(c.peer); r != cm->second.ranks.end() && r->second.pid == pid) {
        r->second.comm = comm;
        r->second.ready = true;
        comm_ids_[std::pair{pid, comm}] = *f.comm_id;
      }
    }
  }
  if ((c.api == GF_API_NCCL_COMM_DESTROY || c.api == GF_API_NCCL_COMM_ABORT) && result == 0)
    comm_ids_.erase(std::pair{pid, c.comm});  // the pointer may be handed out again
  Charge(c, ts_ns, CallBytes(c, stats_));
  Close(f.hang, ts_ns, NcclHang::Outcome::kReturned, result);
  in_flight_.erase(it);
}

void NcclTracker::Absent(const NcclCall& call, uint64_t sequence, std::vector<NcclAbsentRank>& out) const {
  auto add = [&](int rank, const NcclRank* r, uint64_t entered) {
    for (NcclAbsentRank& a : out)
      if (a.rank == rank) {
        a.entered = std::min(a.entered, entered);
        return;
      }
    out.push_back({rank, r ? r->pid : 0, entered});
  };
  if (GF_API_IS_NCCL_INIT(call.api)) {
    auto c = comms_.find(NcclCommId{call.id_lo, call.id_hi});
    if (c == comms_.end()) return;
    for (int q = 0; q < c->second.nranks && out.size() < 64; q++)
      if (q != call.peer && !c->second.ranks.contains(q)) add(q, nullptr, 0);
    return;
  }
  if (sequence == 0) return;  // its communicator or peer is not known: no one to name
  auto id = comm_ids_.find(std::pair{call.pid, call.comm});
  if (id == comm_ids_.end()) return;
  auto c = comms_.find(id->second);
  if (c == comms_.end()) return;
  const NcclCommunicator& comm = c->second;
  int me = -1;
  for (const auto& [r, state] : comm.ranks)
    if (state.pid == call.pid && state.comm == call.comm) me = r;
  auto rank = [&](int q) -> const NcclRank* {
    auto r = comm.ranks.find(q);
    return r == comm.ranks.end() ? nullptr : &r->second;
  };
  auto count = [](const absl::flat_hash_map<int, uint64_t>& m, int q) -> uint64_t {
    auto it = m.find(q);
    return it == m.end() ? 0 : it->second;
  };
  if (IsNcclCollective(call.api)) {
    for (int q = 0; q < comm.nranks && out.size() < 64; q++) {
      if (q == me) continue;
      const NcclRank* r = rank(q);
      const uint64_t entered = r ? r->collectives : 0;
      if (entered < sequence) add(q, r, entered);
    }
  } else if (IsNcclPointToPoint(call.api) && me >= 0) {
    const NcclRank* r = rank(call.peer);
    const uint64_t entered = !r ? 0 : call.api == GF_API_NCCL_SEND ? count(r->recvs_from, me) : count(r->sends_to, me);
    if (entered < sequence) add(call.peer, r, entered);
  }
}

uint64_t NcclTracker::NewHang(NcclHang::Side side) {
  stats_.hangs++;
  if (side == NcclHang::Side::kGpu) stats_.gpu_hangs++;
  if (hangs_.size() >= kMaxHangs) {
    stats_.hangs_not_kept++;
    return kHangNotKept;
  }
  return ++last_hang_;
}

void NcclTracker::Tick(uint64_t now_ns) {
  for (auto& [key, f] : in_flight_) {
    if (f.hang != kNoHang || now_ns < f.call.ts_ns || now_ns - f.call.ts_ns < threshold_ns_) continue;
    // Group bookkeeping calls return at once; a stuck one is still a hang.
    f.hang = NewHang(NcclHang::Side::kCall);
    if (f.hang == kHangNotKept) continue;
    const NcclCall& c = f.call;
    NcclHang h;
    h.number = f.hang;
    h.pid = c.pid;
    h.tid = c.tid;
    h.api = c.api;
    h.comm = c.comm;
    h.comm_id = f.comm_id;
    h.peer = c.peer;
    h.count = c.count;
    h.datatype = c.datatype;
    h.op = c.op;
    h.stream = c.stream;
    h.sequence = f.sequence;
    h.start_ns = c.ts_ns;
    h.found_ns = now_ns;
    h.stack = c.stack;
    if (GF_API_IS_NCCL_INIT(c.api)) {
      h.rank = c.peer;
      h.nranks = static_cast<int>(std::min<uint64_t>(c.count, kMaxRanks));
      h.peer = -1;
      h.count = 0;
    } else {
      std::tie(h.rank, h.nranks) = RankOf(c.pid, c.comm);
    }
    h.bytes = CallBytesQuiet(c);
    Absent(c, f.sequence, h.absent);
    for (const auto& [g, seq] : f.grouped) {
      h.grouped.push_back(g.api);
      h.bytes += CallBytesQuiet(g);
      if (h.comm == 0) h.comm = g.comm;
      if (h.rank < 0) std::tie(h.rank, h.nranks) = RankOf(g.pid, g.comm);
      if (!h.comm_id)
        if (auto id = comm_ids_.find(std::pair{g.pid, g.comm}); id != comm_ids_.end()) h.comm_id = id->second;
      Absent(g, seq, h.absent);
    }
    std::sort(h.absent.begin(), h.absent.end(),
              [](const NcclAbsentRank& a, const NcclAbsentRank& b) { return a.rank < b.rank; });
    found_.push_back(h.number);
    hangs_.emplace(h.number, std::move(h));
  }
  TickSyncs(now_ns);
  // Launches whose records never came, once every few seconds (a TTL of 30 s).
  if ((!gpu_launches_.empty() || !route_hits_.empty()) && now_ns > last_gpu_sweep_ns_ + 5'000'000'000ull)
    ExpireGpuLaunches(now_ns);
}

void NcclTracker::Charge(const NcclCall& c, uint64_t end_ns, uint64_t bytes) {
  const uint64_t ns = end_ns > c.ts_ns ? end_ns - c.ts_ns : 0;
  steps_.OnCall(c.pid, c.ts_ns, end_ns);
  for (NcclStackTotals* t :
       {&totals_[c.stack], c.api >= GF_API_NCCL_ALL_REDUCE && size_t{c.api} - GF_API_NCCL_ALL_REDUCE < kApis
                               ? &by_api_[c.api - GF_API_NCCL_ALL_REDUCE]
                               : nullptr}) {
    if (!t) continue;
    t->calls++;
    t->nanos += ns;
    t->bytes += bytes;
  }
}

void NcclTracker::Close(uint64_t hang, uint64_t end_ns, NcclHang::Outcome outcome, uint32_t result) {
  auto it = hangs_.find(hang);
  if (it == hangs_.end()) return;  // none, or counted and not kept
  NcclHang& h = it->second;
  h.outcome = outcome;
  h.end_ns = end_ns;
  h.result = result;
  ended_.push_back(hang);
}

void NcclTracker::OnThreadEnded(pid_t pid, uint32_t tid, uint64_t ts_ns, uint32_t which) {
  const ThreadKey key{pid, tid};
  if (which & GF_ENDED_NCCL_CALL) {
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      stats_.ended_with_thread++;
      Charge(it->second.call, ts_ns, CallBytesQuiet(it->second.call));
      Close(it->second.hang, ts_ns, NcclHang::Outcome::kThreadEnded, 0);
      in_flight_.erase(it);
    }
    groups_.erase(key);
  }
  if (which & GF_ENDED_SYNC_CALL) {
    if (auto it = syncs_.find(key); it != syncs_.end()) {
      stats_.ended_with_thread++;
      Close(it->second.hang, ts_ns, NcclHang::Outcome::kThreadEnded, 0);
      syncs_.erase(it);
    }
  }
}

void NcclTracker::OnProcessExit(pid_t pid, uint64_t ts_ns) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->first.first != pid) {
      ++it;
      continue;
    }
    InFlight& f = it->second;
    Charge(f.call, ts_ns, CallBytesQuiet(f.call));
    Close(f.hang, ts_ns, NcclHang::Outcome::kProcessEnded, 0);
    in_flight_.erase(it++);
  }
  EndSyncs(pid, ts_ns);
  absl::erase_if(groups_, [&](const auto& kv) { return kv.first.first == pid; });
  absl::erase_if(comm_ids_, [&](const auto& kv) { return kv.first.first == pid; });
  ForgetGpuProcess(pid);  // its last records came before its exit (the library flushes at exit)
  stragglers_.OnProcessExit(pid);
}

void NcclTracker::Finish(uint64_t now_ns) {
  for (auto& [key, f] : in_flight_) {
    Charge(f.call, now_ns, CallBytesQuiet(f.call));
    stats_.unfinished++;
    if (auto h = hangs_.find(f.hang); h != hangs_.end()) h->second.end_ns = now_ns;  // still stuck: how long so far
  }
  for (auto& [key, s] : syncs_)
    if (auto h = hangs_.find(s.hang); h != hangs_.end()) h->second.end_ns = now_ns;
  in_flight_.clear();
  syncs_.clear();
  groups_.clear();
  stats_.gpu_launches_without_record += gpu_launches_.size();
  gpu_launches_.clear();
  route_hits_.clear();  // never joined: the route's joiner counted them
  stragglers_.Finish();
}

void NcclTracker::ForgetStacks(const std::vector<StackId>& stacks) {
  stragglers_.ForgetStacks(stacks);
  const absl::flat_hash_set<StackId> gone(stacks.begin(), stacks.end());
  auto forget = [&](StackId& id) {
    if (gone.contains(id)) id = StackTable::kNone;
  };
  for (StackId id : stacks) totals_.erase(id);
  for (auto& [n, h] : hangs_) {
    forget(h.stack);
    forget(h.sync_stack);
  }
  for (auto& [pid, calls] : recent_)
    for (Issued& i : calls) forget(i.call.stack);
  for (auto& [key, s] : syncs_) forget(s.call.stack);
  for (auto& [key, l] : gpu_launches_) forget(l.stack);  // its GPU time then goes to its operation alone
  for (auto& [key, l] : route_hits_) forget(l.stack);
}

void NcclTracker::ForgetProcesses(std::span<const pid_t> pids) {
  const absl::flat_hash_set<pid_t> gone(pids.begin(), pids.end());
  absl::flat_hash_set<NcclCommId> ended;
  for (auto it = comms_.begin(); it != comms_.end();) {
    tracked_ranks_ -= absl::erase_if(it->second.ranks, [&](const auto& kv) { return gone.contains(kv.second.pid); });
    if (it->second.ranks.empty()) {
      ended.insert(it->first);
      comms_.erase(it++);
    } else {
      ++it;
    }
  }
  stragglers_.ForgetCommunicators(ended);
  for (pid_t pid : pids) stragglers_.OnProcessExit(pid);
  absl::erase_if(comm_ids_, [&](const auto& kv) { return gone.contains(kv.first.first); });
  absl::erase_if(recent_, [&](const auto& kv) { return gone.contains(kv.first); });
  for (pid_t pid : pids) ForgetGpuProcess(pid);
}

std::pair<int, int> NcclTracker::RankOf(pid_t pid, uint64_t comm) const {
  auto id = comm_ids_.find(std::pair{pid, comm});
  if (id == comm_ids_.end()) return {-1, 0};
  auto c = comms_.find(id->second);
  if (c == comms_.end()) return {-1, 0};
  for (const auto& [r, state] : c->second.ranks)
    if (state.pid == pid && state.comm == comm) return {r, c->second.nranks};
  return {-1, c->second.nranks};
}

std::vector<NcclHang> NcclTracker::TakeFound() {
  std::vector<NcclHang> out;
  for (uint64_t n : found_)
    if (auto it = hangs_.find(n); it != hangs_.end()) out.push_back(it->second);
  found_.clear();
  return out;
}

std::vector<NcclHang> NcclTracker::TakeEnded() {
  std::vector<NcclHang> out;
  for (uint64_t n : ended_) {
    auto it = hangs_.find(n);
    if (it == hangs_.end()) continue;
    out.push_back(it->second);
    if (forget_ended_) hangs_.erase(it);  // said over: nothing more to say of it
  }
  ended_.clear();
  return out;
}

}  // namespace gpuflame::profiler
