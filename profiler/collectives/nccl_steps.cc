#include "profiler/collectives/nccl_steps.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "profiler/collectives/nccl_stragglers.h"

namespace gpuflame::profiler {

void NcclSteps::OnCollective(const NcclCommId& id, int nranks, int rank, pid_t pid, uint64_t sequence, uint64_t ts_ns,
                             StackId stack) {
  if (!enabled_ || rank < 0 || sequence == 0) return;
  Comm& c = comms_[id];
  c.nranks = nranks;
  auto r = c.ranks.find(rank);
  if (r == c.ranks.end()) {
    if (ranks_ >= kMaxRanks) {
      stats_.entries_dropped++;
      return;
    }
    ranks_++;
    r = c.ranks.emplace(rank, RankEntries{}).first;
  }
  RankEntries& e = r->second;
  if (e.pid != pid || (!e.entries.empty() && e.entries.back().sequence >= sequence)) {
    entries_ -= e.entries.size();
    e = RankEntries{};  // a new process in that rank (a pid reused, a communicator's hash again): start again
    e.pid = pid;
  }
  if (entries_ >= kMaxEntries) {
    stats_.entries_dropped++;
    return;
  }
  entries_++;
  e.entries.push_back({sequence, ts_ns, stack});
}

void NcclSteps::OnCall(pid_t pid, uint64_t start_ns, uint64_t end_ns) {
  if (!enabled_ || end_ns <= start_ns) return;
  if (calls_kept_ >= kMaxCalls) {
    stats_.calls_dropped++;
    return;
  }
  calls_kept_++;
  calls_[pid].push_back({start_ns, end_ns});
}

namespace {

// The indices of a rank's anchor entries: those from the call site of its
// first collective that comes round again.
template <typename Entries>
std::pair<StackId, std::vector<size_t>> Anchors(const Entries& entries) {
  absl::flat_hash_map<StackId, uint32_t> seen;
  for (const auto& e : entries) seen[e.stack]++;
  for (const auto& e : entries) {
    if (seen[e.stack] < 2) continue;
    std::vector<size_t> at;
    for (size_t i = 0; i < entries.size(); i++)
      if (entries[i].stack == e.stack) at.push_back(i);
    return {e.stack, std::move(at)};
  }
  return {StackTable::kNone, {}};
}

}  // namespace

std::vector<NcclCommSteps> NcclSteps::Steps() const {
  std::vector<NcclCommSteps> out;
  // Each process's calls in start order, once.
  absl::flat_hash_map<pid_t, std::vector<Call>> sorted;
  for (const auto& [pid, calls] : calls_) {
    std::vector<Call>& s = sorted[pid] = calls;
    std::sort(s.begin(), s.end(), [](const Call& a, const Call& b) { return a.start_ns < b.start_ns; });
  }
  // Time |pid| spent in NCCL calls within [from, to).
  auto in_nccl = [&](pid_t pid, uint64_t from, uint64_t to) {
    auto it = sorted.find(pid);
    if (it == sorted.end()) return uint64_t{0};
    const std::vector<Call>& calls = it->second;
    auto c = std::lower_bound(calls.begin(), calls.end(), from,
                              [](const Call& call, uint64_t t) { return call.start_ns < t; });
    // A call entered before the step may run into it: a few back suffice
    // (calls of one process overlap only across its threads).
    for (int back = 0; back < 64 && c != calls.begin(); back++) --c;
    uint64_t ns = 0;
    for (; c != calls.end() && c->start_ns < to; ++c) {
      const uint64_t a = std::max(c->start_ns, from), b = std::min(c->end_ns, to);
      if (b > a) ns += b - a;
    }
    return ns;
  };
  std::vector<NcclCommId> ids;
  for (const auto& [id, c] : comms_) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), [](const NcclCommId& a, const NcclCommId& b) {
    return std::pair{a.hi, a.lo} < std::pair{b.hi, b.lo};
  });
  for (const NcclCommId& id : ids) {
    const Comm& c = comms_.at(id);
    if (c.ranks.empty()) continue;
    std::map<int, std::vector<size_t>> anchors;
    NcclCommSteps cs;
    cs.id = id;
    cs.nranks = c.nranks;
    size_t steps = SIZE_MAX;
    for (const auto& [rank, r] : c.ranks) {
      auto [stack, at] = Anchors(r.entries);
      if (cs.anchor == StackTable::kNone) cs.anchor = stack;
      steps = std::min(steps, at.size() > 1 ? at.size() - 1 : 0);
      anchors[rank] = std::move(at);
    }
    // A rank's entry of |sequence| (null: none kept).
    auto entry = [&](const RankEntries& r, uint64_t sequence) -> const Entry* {
      auto e = std::lower_bound(r.entries.begin(), r.entries.end(), sequence,
                                [](const Entry& x, uint64_t s) { return x.sequence < s; });
      return e != r.entries.end() && e->sequence == sequence ? &*e : nullptr;
    };
    const RankEntries& lowest = c.ranks.begin()->second;
    const std::vector<size_t>& lowest_at = anchors.begin()->second;
    for (size_t k = 0; k < steps; k++) {
      NcclStep step;
      step.number = k + 1;
      step.start_ns = UINT64_MAX;
      std::map<int, NcclStepRank> ranks;
      for (const auto& [rank, r] : c.ranks) {
        const std::vector<size_t>& at = anchors.at(rank);
        const uint64_t from = r.entries[at[k]].ts_ns, to = r.entries[at[k + 1]].ts_ns;
        NcclStepRank& s = ranks[rank];
        s.rank = rank;
        s.pid = r.pid;
        s.step_ns = to > from ? to - from : 0;
        s.nccl_ns = std::min(in_nccl(r.pid, from, to), s.step_ns);
        s.compute_ns = s.step_ns - s.nccl_ns;
        step.start_ns = std::min(step.start_ns, from);
      }
      // The step's collectives: the lowest rank's, from its anchor to the next.
      for (size_t i = lowest_at[k]; i < lowest_at[k + 1]; i++) {
        const uint64_t sequence = lowest.entries[i].sequence;
        std::vector<std::pair<int, uint64_t>> entered;
        for (const auto& [rank, r] : c.ranks)
          if (const Entry* e = entry(r, sequence)) entered.emplace_back(rank, e->ts_ns);
        if (entered.size() != c.ranks.size()) continue;  // a rank's entry not kept: not judged
        uint64_t first = UINT64_MAX, last = 0;
        int last_rank = -1;
        for (const auto& [rank, ts] : entered) {
          first = std::min(first, ts);
          if (ts > last || last_rank < 0) last = ts, last_rank = rank;
        }
        uint64_t held = 0;
        for (const auto& [rank, ts] : entered) {
          ranks[rank].waiting_ns += last - ts;
          held += last - ts;
        }
        if (last - first >= NcclStragglers::kLateNs) ranks[last_rank].held_ns += held;
      }
      uint64_t most = 0;
      for (auto& [rank, s] : ranks) {
        if (s.held_ns > most) most = s.held_ns, step.straggler = rank;
        step.ranks.push_back(s);
      }
      cs.steps.push_back(std::move(step));
    }
    out.push_back(std::move(cs));
  }
  return out;
}

}  // namespace gpuflame::profiler
