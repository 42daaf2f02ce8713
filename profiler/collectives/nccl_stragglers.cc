#include "profiler/collectives/nccl_stragglers.h"

#include <algorithm>
#include <iterator>

namespace gpuflame::profiler {

void NcclStragglers::OnCpuSample(pid_t pid, uint64_t ts_ns, StackId stack) {
  auto it = sampled_.find(pid);
  if (it == sampled_.end()) return;
  stats_.samples++;
  std::deque<Sample>& q = it->second;
  if (q.size() >= kMaxSamples) {
    q.pop_front();
    stats_.samples_evicted++;
  }
  // Kept in time order for the search in ChargeDoing: samples of two CPUs
  // may reach the ring a little out of order, never by much.
  auto at = q.end();
  for (int steps = 0; at != q.begin() && std::prev(at)->ts_ns > ts_ns && steps < 64; steps++) --at;
  q.insert(at, Sample{ts_ns, stack});
}

void NcclStragglers::OnCollective(const NcclCommId& id, int nranks, int ranks_seen, int rank, pid_t pid,
                                  uint64_t sequence, uint64_t ts_ns, StackId stack) {
  if (rank < 0 || ranks_seen <= 0 || sequence == 0) return;
  auto c = comms_.find(id);
  if (c == comms_.end()) {
    if (comms_.size() >= kMaxCommunicators) {
      stats_.communicators_dropped++;
      return;
    }
    c = comms_.emplace(id, NcclCommWaits{}).first;
    c->second.id = id;
  }
  NcclCommWaits& comm = c->second;
  comm.nranks = nranks;
  comm.ranks_seen = std::max(comm.ranks_seen, std::min(ranks_seen, nranks));
  const OpKey key{id, sequence};
  auto op = open_.find(key);
  if (op == open_.end()) {
    if (open_.size() >= kMaxOpen) EvictOldest();
    op = open_.emplace(key, Open{{}, opened_++}).first;
  }
  std::vector<Entry>& entries = op->second.entries;
  // A rank's n-th collective comes once; a second one is a pid reused by a
  // new job on an old communicator's hash: the op starts again.
  for (const Entry& e : entries)
    if (e.rank == rank) {
      entries.clear();
      break;
    }
  entries.push_back({rank, pid, ts_ns, stack});
  if (static_cast<int>(entries.size()) < comm.ranks_seen) return;
  std::vector<Entry> done = std::move(entries);
  open_.erase(op);
  Judge(comm, done);
}

void NcclStragglers::Judge(NcclCommWaits& c, const std::vector<Entry>& entries) {
  c.judged++;
  const Entry* last = &entries.front();
  uint64_t first_ns = last->ts_ns;
  for (const Entry& e : entries) {
    if (e.ts_ns > last->ts_ns) last = &e;
    first_ns = std::min(first_ns, e.ts_ns);
  }
  uint64_t held = 0;  // the ranks' waits for the last, summed
  for (const Entry& e : entries) {
    NcclRankWaits& r = c.ranks[e.rank];
    r.rank = e.rank;
    r.pid = e.pid;
    r.operations++;
    r.waited_ns += last->ts_ns - e.ts_ns;
    held += last->ts_ns - e.ts_ns;
  }
  if (last->ts_ns - first_ns < kLateNs) {
    c.balanced++;
    return;
  }
  NcclRankWaits& s = c.ranks[last->rank];
  s.last++;
  s.held_ns += held;
  s.late_from_ns[last->stack] += held;
  ChargeDoing(s, first_ns, last->ts_ns, held);
}

void NcclStragglers::ChargeDoing(NcclRankWaits& r, uint64_t from, uint64_t to, uint64_t ns) {
  auto it = sampled_.find(r.pid);
  if (it == sampled_.end() || it->second.empty()) {
    r.off_cpu_ns += ns;
    return;
  }
  const std::deque<Sample>& q = it->second;
  if (q.front().ts_ns > from && q.size() >= kMaxSamples) {
    // Evicted samples may have covered the lateness's start: not said as off the CPU.
    r.beyond_samples_ns += ns;
    return;
  }
  // Samples arrive in about time order (one ring buffer): search from the end.
  auto begin = std::upper_bound(q.begin(), q.end(), from, [](uint64_t t, const Sample& s) { return t < s.ts_ns; });
  auto end = std::upper_bound(begin, q.end(), to, [](uint64_t t, const Sample& s) { return t < s.ts_ns; });
  const auto n = static_cast<uint64_t>(end - begin);
  if (n == 0) {
    r.off_cpu_ns += ns;
    return;
  }
  // Evenly, the remainder to the first samples: the shares add up to |ns|.
  uint64_t i = 0;
  for (auto s = begin; s != end; ++s, ++i) r.doing_ns[s->stack] += ns / n + (i < ns % n ? 1 : 0);
}

void NcclStragglers::EvictOldest() {
  auto oldest = std::min_element(open_.begin(), open_.end(),
                                 [](const auto& a, const auto& b) { return a.second.opened < b.second.opened; });
  if (oldest == open_.end()) return;
  if (auto c = comms_.find(oldest->first.first); c != comms_.end()) c->second.unjudged++;
  stats_.operations_evicted++;
  open_.erase(oldest);
}

void NcclStragglers::Finish() {
  for (const auto& [key, op] : open_)
    if (auto c = comms_.find(key.first); c != comms_.end()) c->second.unjudged++;
  open_.clear();
}

void NcclStragglers::ForgetStacks(std::span<const StackId> stacks) {
  // The agent's stacks are renumbered: their time stays, by no stack. (The
  // samples kept are of live processes, whose stacks are not retired.)
  const absl::flat_hash_set<StackId> gone(stacks.begin(), stacks.end());
  for (auto& [id, c] : comms_)
    for (auto& [rank, r] : c.ranks)
      for (auto* m : {&r.doing_ns, &r.late_from_ns}) {
        uint64_t moved = 0;
        absl::erase_if(*m, [&](const auto& kv) {
          if (kv.first == StackTable::kNone || !gone.contains(kv.first)) return false;
          moved += kv.second;
          return true;
        });
        if (moved) (*m)[StackTable::kNone] += moved;
      }
}

void NcclStragglers::ForgetCommunicators(const absl::flat_hash_set<NcclCommId>& gone) {
  absl::erase_if(comms_, [&](const auto& kv) { return gone.contains(kv.first); });
  absl::erase_if(open_, [&](const auto& kv) { return gone.contains(kv.first.first); });
}

}  // namespace gpuflame::profiler
