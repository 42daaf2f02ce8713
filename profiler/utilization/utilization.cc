#include "profiler/utilization/utilization.h"

#include <algorithm>
#include <optional>

namespace gpuflame::profiler::utilization {

namespace {

// The sums a wait of |ns| adds, by which call it was (enum gf_sync_kind).
void AddWait(SyncStats& s, uint8_t kind, uint64_t ns) {
  s.calls++;
  s.ns += ns;
  (kind == GF_SYNC_STREAM ? s.stream_ns : kind == GF_SYNC_EVENT ? s.event_ns : s.context_ns) += ns;
}

uint8_t SyncKindOf(uint16_t api) {
  switch (api) {
    case GF_API_CUDA_STREAM_SYNC:
    case GF_API_CU_STREAM_SYNC: return GF_SYNC_STREAM;
    case GF_API_CUDA_EVENT_SYNC:
    case GF_API_CU_EVENT_SYNC: return GF_SYNC_EVENT;
    default: return GF_SYNC_CONTEXT;
  }
}

}  // namespace

void Utilization::OnGpuRecords(pid_t pid, std::span<const gf_kernel_record> records) {
  BusyLane* lane = nullptr;
  uint32_t lane_device = 0;
  ProcessSpans* windowed = o_.windowed ? &spans_[pid] : nullptr;
  for (const gf_kernel_record& r : records) {
    if (r.kind == GF_GPU_DEVICE) {  // not work, in either mode: which GPU a lane is
      uuids_.OnRecord(pid, r);
      continue;
    }
    if (windowed) {
      windowed->newest_ns = std::max(windowed->newest_ns, std::max(r.start_ns, r.end_ns));
      if (r.kind == GF_GPU_ACTIVITY_WINDOW) {
        AddSpan(*windowed, r.start_ns, r.end_ns);
        continue;
      }
      if (r.kind == GF_GPU_SYNC) {
        windowed->sync_ns += r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
        continue;
      }
      if (!GF_GPU_IS_WORK(r.kind)) continue;
      auto key = std::pair{pid, r.device};
      auto it = windowed_.find(key);
      if (it == windowed_.end()) {
        if (windowed_.size() >= o_.max_lanes) {
          lanes_dropped_++;
          continue;
        }
        it = windowed_.emplace(key, WindowedLane(o_.lane)).first;
      }
      it->second.Add(r);
      continue;
    }
    // Activity always on (record): its spans say nothing the records do not.
    if (r.kind == GF_GPU_ACTIVITY_WINDOW) continue;
    if (r.kind == GF_GPU_SYNC) {
      SyncStats& s = cupti_syncs_[pid];
      const uint64_t ns = r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
      AddWait(s, r.copy_kind, ns);
      std::vector<Gap>& spans = sync_spans_[pid];
      if (spans.size() < o_.max_syncs) spans.push_back({r.start_ns, r.start_ns + ns});
      else s.not_kept++;
      continue;
    }
    if (!GF_GPU_IS_WORK(r.kind)) continue;  // a kind from a newer library (the ABI's v5 rule)
    // A batch is mostly one device's: the lane is looked up again only when it changes.
    if (!lane || r.device != lane_device) {
      auto key = std::pair{pid, r.device};
      auto it = lanes_.find(key);
      if (it == lanes_.end()) {
        if (lanes_.size() >= o_.max_lanes) {
          lanes_dropped_++;
          lane = nullptr;
          continue;
        }
        it = lanes_.emplace(key, BusyLane(o_.lane)).first;
      }
      lane = &it->second;
      lane_device = r.device;
    }
    lane->Add(r);
  }
  if (windowed) return;  // judged in JudgeWindows
  // This process's lanes only: they are adjacent in the (pid, device) order.
  for (auto it = lanes_.lower_bound({pid, 0}); it != lanes_.end() && it->first.first == pid; ++it)
    it->second.Settle(false);
}

void Utilization::OnCpuSample(pid_t pid, uint64_t ts_ns, StackId stack) {
  if (o_.windowed && !spans_.contains(pid)) return;  // no GPU record of it yet: nothing to join with
  if (samples_.size() >= o_.max_samples) {
    samples_dropped_++;
    return;
  }
  samples_.push_back({ts_ns, pid, stack});
}

void Utilization::OnSyncCall(pid_t pid, uint16_t api, uint64_t start_ns, uint64_t end_ns, StackId stack) {
  const uint64_t ns = end_ns > start_ns ? end_ns - start_ns : 0;
  if (o_.windowed) {  // the window's sum only: nothing kept for a join at the end
    spans_[pid].sync_ns += ns;
    return;
  }
  SyncStats& s = probe_syncs_[pid];
  s.from_probes = true;
  AddWait(s, SyncKindOf(api), ns);
  std::vector<Gap>& spans = probe_spans_[pid];
  if (spans.size() < o_.max_syncs) spans.push_back({start_ns, start_ns + ns});
  else s.not_kept++;
  const auto key = std::pair{pid, stack};
  if (auto it = sync_stacks_.find(key); it != sync_stacks_.end()) it->second += ns;
  else if (sync_stacks_.size() < o_.max_sync_stacks) sync_stacks_.emplace(key, ns);
  else sync_stacks_dropped_++;
}

void Utilization::ResolveSyncs() {
  // One source per process, never both: with CUPTI's SYNCHRONIZATION
  // records on (record --sync-waits, or the process's own
  // GPUFLAME_CUPTI_KINDS) and the probes attached, each wait arrives twice.
  // The probes are preferred: they carry the caller's stack and cost less;
  // CUPTI's records of that process are counted as ignored. A process the
  // probes never reported (its libcudart not probed) keeps CUPTI's.
  syncs_ = cupti_syncs_;
  for (auto& [pid, probe] : probe_syncs_) {
    SyncStats s = probe;
    if (auto c = cupti_syncs_.find(pid); c != cupti_syncs_.end()) s.cupti_ignored = c->second.calls;
    // The gap join is on CUPTI's clock: through the process's clock pairs,
    // all arrived by now. Without any, the waits stay in the sums only.
    std::vector<Gap> spans;
    for (const Gap& g : probe_spans_[pid]) {
      const std::optional<uint64_t> a = clock_.ToCupti(pid, g.start_ns);
      const std::optional<uint64_t> b = clock_.ToCupti(pid, g.end_ns);
      if (!a || !b || *b < *a) {
        s.not_aligned++;
        continue;
      }
      spans.push_back({*a, *b});
    }
    sync_spans_[pid] = std::move(spans);
    syncs_[pid] = s;
  }
}

void Utilization::Finish() {
  for (auto& [key, lane] : lanes_) lane.Settle(true);
  ResolveSyncs();
  // Each process's waits as their union: time in which some thread of it
  // waited (threads may wait at once), disjoint and in order for the join.
  for (auto& [pid, spans] : sync_spans_) {
    std::sort(spans.begin(), spans.end(), [](const Gap& a, const Gap& b) { return a.start_ns < b.start_ns; });
    size_t out = 0;
    for (const Gap& g : spans) {
      if (out && g.start_ns <= spans[out - 1].end_ns) spans[out - 1].end_ns = std::max(spans[out - 1].end_ns, g.end_ns);
      else spans[out++] = g;
    }
    spans.resize(out);
  }
  std::sort(samples_.begin(), samples_.end(),
            [](const CpuSample& a, const CpuSample& b) { return a.pid != b.pid ? a.pid < b.pid : a.ts_ns < b.ts_ns; });
}

namespace {

// Time of [start, end) covered by |spans| (disjoint, in order).
uint64_t Covered(const std::vector<Gap>& spans, uint64_t start, uint64_t end) {
  auto it = std::lower_bound(spans.begin(), spans.end(), start, [](const Gap& g, uint64_t t) { return g.end_ns <= t; });
  uint64_t covered = 0;
  for (; it != spans.end() && it->start_ns < end; ++it) {
    const uint64_t a = std::max(start, it->start_ns), b = std::min(end, it->end_ns);
    if (b > a) covered += b - a;
  }
  return std::min(covered, end - start);
}

}  // namespace

IdleJoin Utilization::JoinIdle(const std::map<std::pair<pid_t, uint32_t>, uint64_t>& steady_start) const {
  IdleJoin join;
  join.samples_dropped = samples_dropped_;
  for (const auto& [key, lane] : lanes_) {
    const auto [pid, device] = key;
    auto steady = steady_start.find(key);
    const uint64_t steady_ns = steady == steady_start.end() ? 0 : steady->second;
    auto first =
        std::lower_bound(samples_.begin(), samples_.end(), pid, [](const CpuSample& s, pid_t p) { return s.pid < p; });
    auto last = std::upper_bound(first, samples_.end(), pid, [](pid_t p, const CpuSample& s) { return p < s.pid; });
    auto syncs = sync_spans_.find(pid);
    for (const Gap& g : lane.gaps()) {
      join.gaps++;
      const bool start_up = g.end_ns <= steady_ns;
      if (syncs != sync_spans_.end() && !start_up)
        join.sync_in_gaps_ns[key] += Covered(syncs->second, g.start_ns, g.end_ns);
      JoinGap(pid, device, g, start_up, first, last, join);
    }
  }
  return join;
}

void Utilization::JoinGap(pid_t pid, uint32_t device, const Gap& g, bool start_up, SampleIt first, SampleIt last,
                          IdleJoin& join) const {
  const uint64_t len = g.end_ns - g.start_ns;
  const std::optional<uint64_t> a = clock_.ToMonotonic(pid, g.start_ns);
  const std::optional<uint64_t> b = clock_.ToMonotonic(pid, g.end_ns);
  if (!a || !b || *b < *a) {
    join.gaps_unaligned++;
    join.unaligned_ns += len;
    return;
  }
  auto lo = std::lower_bound(first, last, *a, [](const CpuSample& s, uint64_t t) { return s.ts_ns < t; });
  auto hi = std::lower_bound(lo, last, *b, [](const CpuSample& s, uint64_t t) { return s.ts_ns < t; });
  const auto n = static_cast<uint64_t>(hi - lo);
  if (n == 0) {
    join.gaps_without_sample++;
    join.ns[{pid, device, StackTable::kNone, start_up}] += len;
    return;
  }
  // Evenly, the remainder to the first samples: the shares add up to the
  // gap exactly.
  const uint64_t share = len / n, extra = len % n;
  uint64_t i = 0;
  for (auto s = lo; s != hi; ++s, ++i) join.ns[{pid, device, s->stack, start_up}] += share + (i < extra ? 1 : 0);
}

void Utilization::AddSpan(ProcessSpans& p, uint64_t start, uint64_t end) {
  if (end <= start) return;
  std::vector<Gap>& v = p.spans;
  // Mostly the newest, or the open span's repeat with a later end.
  auto it = std::lower_bound(v.begin(), v.end(), start, [](const Gap& g, uint64_t t) { return g.end_ns < t; });
  if (it == v.end() || it->start_ns > end) {
    v.insert(it, {start, end});
  } else {
    it->start_ns = std::min(it->start_ns, start);
    it->end_ns = std::max(it->end_ns, end);
    auto next = it + 1;
    while (next != v.end() && next->start_ns <= it->end_ns) {
      it->end_ns = std::max(it->end_ns, next->end_ns);
      next = v.erase(next);
    }
  }
  if (v.size() > o_.max_spans) {
    v.erase(v.begin());
    p.spans_dropped++;
  }
}

void Utilization::JoinGaps(pid_t pid, uint32_t device, const std::vector<Gap>& gaps, IdleJoin& join) const {
  auto first =
      std::lower_bound(samples_.begin(), samples_.end(), pid, [](const CpuSample& s, pid_t p) { return s.pid < p; });
  auto last = std::upper_bound(first, samples_.end(), pid, [](pid_t p, const CpuSample& s) { return p < s.pid; });
  for (const Gap& g : gaps) {
    join.gaps++;
    JoinGap(pid, device, g, /*start_up=*/false, first, last, join);
  }
}

std::vector<JudgedLane> Utilization::JudgeWindows(const std::function<bool(pid_t)>& ended, IdleJoin& join) {
  std::vector<JudgedLane> out;
  join.samples_dropped = samples_dropped_;
  std::sort(samples_.begin(), samples_.end(),
            [](const CpuSample& a, const CpuSample& b) { return a.pid != b.pid ? a.pid < b.pid : a.ts_ns < b.ts_ns; });
  static const ProcessSpans kNoSpans;
  // The oldest time a lane of each process still has to judge (CUPTI's clock).
  absl::flat_hash_map<pid_t, uint64_t> still_open;
  for (auto it = windowed_.begin(); it != windowed_.end();) {
    const auto [pid, device] = it->first;
    const bool gone = ended(pid);
    auto sp = spans_.find(pid);
    const ProcessSpans& p = sp == spans_.end() ? kNoSpans : sp->second;
    JudgedLane l;
    l.pid = pid;
    l.device = device;
    l.uuid = uuids_.Of(pid, device);
    l.judgement = it->second.Judge(p.spans, p.newest_ns, gone);
    l.judgement.sync_ns = p.sync_ns;
    l.from_mono_ns = clock_.ToMonotonic(pid, l.judgement.from_ns);
    l.to_mono_ns = clock_.ToMonotonic(pid, l.judgement.to_ns);
    if (!l.from_mono_ns || !l.to_mono_ns) l.from_mono_ns = l.to_mono_ns = std::nullopt;
    l.counts = it->second.counts();
    l.ended = gone;
    JoinGaps(pid, device, l.judgement.idle_gaps, join);
    if (gone) {
      it = windowed_.erase(it);
    } else {
      uint64_t& open = still_open.try_emplace(pid, UINT64_MAX).first->second;
      open = std::min(open, it->second.judged_to());
      ++it;
    }
    out.push_back(std::move(l));
  }
  // What no lane needs any more: spans wholly judged, samples before the
  // oldest stretch still to judge (a gap carried open may begin a little
  // earlier: kept back by the reorder horizon's worth), processes without a
  // lane left.
  for (auto it = spans_.begin(); it != spans_.end();) {
    auto open = still_open.find(it->first);
    if (open == still_open.end() && ended(it->first)) {
      clock_.Forget(it->first);
      uuids_.Forget(it->first);
      spans_.erase(it++);
      continue;
    }
    it->second.sync_ns = 0;
    if (open != still_open.end()) {
      std::vector<Gap>& v = it->second.spans;
      const uint64_t keep_from = open->second > o_.lane.reorder_ns ? open->second - o_.lane.reorder_ns : 0;
      v.erase(v.begin(),
              std::lower_bound(v.begin(), v.end(), keep_from, [](const Gap& g, uint64_t t) { return g.end_ns <= t; }));
    }
    ++it;
  }
  std::erase_if(samples_, [&](const CpuSample& s) {
    auto open = still_open.find(s.pid);
    if (open == still_open.end()) return true;  // no lane to join it with
    const std::optional<uint64_t> mono = clock_.ToMonotonic(s.pid, open->second);
    return mono && s.ts_ns + o_.lane.reorder_ns < *mono;
  });
  return out;
}

}  // namespace gpuflame::profiler::utilization
