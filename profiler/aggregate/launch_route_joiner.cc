#include "profiler/aggregate/launch_route_joiner.h"

#include <algorithm>

namespace gpuflame::profiler {

void LaunchRouteJoiner::OnHit(pid_t pid, uint32_t ns_tid, uint32_t tid, uint64_t ts_ns, StackId stack, uint32_t api) {
  stats_.hits++;
  Process& p = processes_[pid];
  std::deque<Hit>& hits = p.threads[ns_tid].hits;
  if (p.hits >= kMaxHitsPerProcess) {
    // Full: the thread's oldest goes (a record that old will not come, or
    // its call's hit is long passed), else this one.
    stats_.hits_dropped++;
    if (hits.empty()) return;
    hits.pop_front();
    p.hits--;
  }
  const Hit hit{.ts_ns = ts_ns, .stack = stack, .tid = tid, .api = api};
  // One thread's hits reach us in its order; kept sorted whatever comes.
  if (hits.empty() || hits.back().ts_ns <= ts_ns) hits.push_back(hit);
  else
    hits.insert(
        std::upper_bound(hits.begin(), hits.end(), ts_ns, [](uint64_t ts, const Hit& h) { return ts < h.ts_ns; }), hit);
  p.hits++;
}

void LaunchRouteJoiner::OnRecords(pid_t pid, std::span<const gf_api_record> records, const JoinedFn& joined) {
  auto pit = processes_.find(pid);
  for (const gf_api_record& r : records) {
    stats_.records++;
    Thread* t = nullptr;
    if (pit != processes_.end()) {
      auto tit = pit->second.threads.find(r.tid);
      if (tit != pit->second.threads.end()) t = &tit->second;
    }
    if (!t) {
      stats_.records_without_hit++;
      continue;
    }
    // Hits before this bound belong to calls that ended before this one
    // began (the thread's previous record), or came too long before it:
    // no record after this one can take them either.
    uint64_t bound = r.start_ns > kMaxLeadNs ? r.start_ns - kMaxLeadNs : 0;
    if (r.start_ns >= t->last_end_ns) bound = std::max(bound, t->last_end_ns);
    std::deque<Hit>& hits = t->hits;
    size_t before_bound = 0;
    while (!hits.empty() && hits.front().ts_ns < bound) {
      hits.pop_front();
      before_bound++;
    }
    // The latest hit at or before the record's start; those before it are
    // calls whose records did not come.
    size_t k = 0;
    while (k < hits.size() && hits[k].ts_ns <= r.start_ns) k++;
    bool join = false;
    if (k == 0) {
      stats_.records_without_hit++;
    } else if (GF_LAUNCH_API_CBID(hits[k - 1].api) != r.cbid) {
      // Another entry point than the record's call: not its hit (records and
      // hits disagree on time), so neither is trusted.
      stats_.api_mismatches++;
      stats_.records_without_hit++;
    } else {
      join = true;
      const Hit& h = hits[k - 1];
      stats_.joined++;
      joined({.correlation = r.correlation, .stack = h.stack, .ts_ns = h.ts_ns, .tid = h.tid, .api = h.api});
    }
    hits.erase(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k));
    stats_.hits_passed += before_bound + k - (join ? 1 : 0);
    pit->second.hits -= before_bound + k;
    t->last_end_ns = std::max(t->last_end_ns, r.end_ns);
  }
}

void LaunchRouteJoiner::Expire(uint64_t now_ns) {
  if (now_ns < kHitTtlNs) return;
  const uint64_t oldest = now_ns - kHitTtlNs;
  for (auto pit = processes_.begin(); pit != processes_.end();) {
    Process& p = pit->second;
    for (auto tit = p.threads.begin(); tit != p.threads.end();) {
      std::deque<Hit>& hits = tit->second.hits;
      while (!hits.empty() && hits.front().ts_ns < oldest) {
        hits.pop_front();
        p.hits--;
        stats_.hits_expired++;
      }
      // A thread quiet for the whole TTL keeps no entry (its previous
      // record's end only guards hits that would come within it).
      if (hits.empty() && tit->second.last_end_ns < oldest) p.threads.erase(tit++);
      else ++tit;
    }
    if (p.threads.empty()) processes_.erase(pit++);
    else ++pit;
  }
}

void LaunchRouteJoiner::ForgetProcess(pid_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  stats_.hits_expired += it->second.hits;
  processes_.erase(it);
}

size_t LaunchRouteJoiner::held() const {
  size_t n = 0;
  for (const auto& [pid, p] : processes_) n += p.hits;
  return n;
}

}  // namespace gpuflame::profiler
