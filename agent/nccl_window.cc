#include "agent/nccl_window.h"

#include <algorithm>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/probes/probe_table.h"

namespace gpuflame::profiler {
namespace {

Profile NewProfile(const char* name, int64_t start_wall, int64_t duration) {
  Profile p;
  p.name = name;
  p.sample_types = {{"time", "nanoseconds"}};
  p.default_sample_type = "time";
  p.period_type = {"time", "nanoseconds"};
  p.period = 1;
  p.time_nanos = start_wall;
  p.duration_nanos = duration;
  return p;
}

std::string Outcome(const NcclHang& h) {
  switch (h.outcome) {
    case NcclHang::Outcome::kStuck: return "stuck";
    case NcclHang::Outcome::kReturned: return "returned";
    case NcclHang::Outcome::kProcessEnded: return "process_ended";
    case NcclHang::Outcome::kThreadEnded: return "thread_ended";
  }
  return "stuck";
}

// The hang's details as sample labels: each a few values per hang (the
// hang number, the pid and the duration are left out: they would make every
// hang, or every window of it, a series of its own beyond the one it is).
void HangLabels(const NcclHang& h, Sample& s) {
  s.labels.push_back({"operation", std::string(ApiName(h.api)), 0});
  s.labels.push_back({"side", h.side == NcclHang::Side::kGpu ? "gpu" : "call", 0});
  s.labels.push_back({"outcome", Outcome(h), 0});
  if (h.comm_id) s.labels.push_back({"nccl_communicator", NcclCommIdHex(*h.comm_id).substr(0, 16), 0});
  if (h.rank >= 0) s.labels.push_back({"nccl_rank", absl::StrCat(h.rank), 0});
  if (h.peer >= 0) s.labels.push_back({"peer", absl::StrCat(h.peer), 0});
  if (!h.absent.empty()) {
    std::string missing;
    for (size_t i = 0; i < h.absent.size() && i < kMaxMissingRanksNamed; i++)
      absl::StrAppend(&missing, i ? "," : "", h.absent[i].rank);
    if (h.absent.size() > kMaxMissingRanksNamed)
      absl::StrAppend(&missing, ",+", h.absent.size() - kMaxMissingRanksNamed);
    s.labels.push_back({"missing_ranks", missing, 0});
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> NcclRankLabels(const NcclTracker& t, pid_t pid) {
  const NcclCommunicator* best = nullptr;
  const NcclRank* rank = nullptr;
  for (const auto& [id, c] : t.communicators())
    for (const auto& [r, state] : c.ranks) {
      if (state.pid != pid) continue;
      // The largest communicator (the job's world), then the lowest ID: the
      // same choice on every node, whatever order the tables hold.
      if (!best || c.nranks > best->nranks ||
          (c.nranks == best->nranks && std::pair{c.id.hi, c.id.lo} < std::pair{best->id.hi, best->id.lo})) {
        best = &c;
        rank = &state;
      }
    }
  if (!best) return {};
  return {{"nccl_communicator", NcclCommIdHex(best->id).substr(0, 16)},
          {"nccl_rank", absl::StrCat(rank->rank)},
          {"nccl_ranks", absl::StrCat(best->nranks)}};
}

void NcclWindow::OnHangsEnded(std::span<const NcclHang> ended) {
  for (const NcclHang& h : ended) {
    if (ended_.size() >= kMaxEnded) {
      ended_dropped_++;
      continue;
    }
    ended_.push_back(h);
  }
}

absl::flat_hash_map<pid_t, std::vector<Profile>> NcclWindow::Close(const NcclTracker& t, StackSource source,
                                                                   const absl::flat_hash_map<pid_t, std::string>& comm,
                                                                   int64_t start_wall, int64_t duration,
                                                                   uint64_t now_ns) {
  // One SampleMaker per profile: it copies each frame into its profile once.
  struct Built {
    Built(const char* name, int64_t start_wall, int64_t duration, StackSource source,
          const absl::flat_hash_map<pid_t, std::string>& comm)
        : p(NewProfile(name, start_wall, duration)), make(source, comm, p) {}
    Profile p;
    SampleMaker make;
  };
  using Built_ = std::unique_ptr<Built>;
  absl::flat_hash_map<pid_t, Built_> nccl, hang, straggler;
  auto profile = [&](absl::flat_hash_map<pid_t, Built_>& m, pid_t pid, const char* name) -> Built& {
    Built_& b = m[pid];
    if (!b) b = std::make_unique<Built>(name, start_wall, duration, source, comm);
    return *b;
  };
  auto valid = [&](StackId id) {
    return id != StackTable::kNone && id < source.stacks.size() && !source.stacks.Get(id).frames.empty();
  };

  // nccl: this window's share of each stack's totals.
  std::vector<std::pair<StackId, NcclStackTotals>> rows;
  for (const auto& [id, now] : t.totals()) {
    NcclStackTotals& last = last_totals_[id];
    NcclStackTotals d{now.calls - std::min(now.calls, last.calls), now.nanos - std::min(now.nanos, last.nanos),
                      now.bytes - std::min(now.bytes, last.bytes),
                      now.gpu_nanos - std::min(now.gpu_nanos, last.gpu_nanos)};
    last = now;
    // GPU time comes with CUPTI's records, up to a flush period after the call returned: a window may have it alone.
    if ((d.calls || d.nanos || d.gpu_nanos) && valid(id)) rows.emplace_back(id, d);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, d] : rows) {
    const StackInfo& stack = source.stacks.Get(id);
    Built& b = profile(nccl, stack.pid, kNcclProfile);
    Profile& p = b.p;
    if (p.sample_types.size() == 1) {
      p.sample_types = {{"calls", "count"}, {"time", "nanoseconds"}, {"bytes", "bytes"}, {"gpu_time", "nanoseconds"}};
      p.comments.push_back(
          "gpuflame: time is each NCCL call's, from entry to return on the calling CPU thread (enqueue and blocking "
          "time on a GPU, not transfer time); a call is charged to the window it returned in");
      p.comments.push_back(
          "gpuflame: gpu_time is the GPU time of the NCCL kernels each call launched (a group's: its ncclGroupEnd's), "
          "charged to the window its records came in, weighted as the gpu_kernel profile's where activity is "
          "duty-cycled");
    }
    Sample s = b.make.Make(stack);
    s.values = {static_cast<int64_t>(d.calls), static_cast<int64_t>(std::min<uint64_t>(d.nanos, INT64_MAX)),
                static_cast<int64_t>(std::min<uint64_t>(d.bytes, INT64_MAX)),
                static_cast<int64_t>(std::min<uint64_t>(d.gpu_nanos, INT64_MAX))};
    p.samples.push_back(std::move(s));
  }

  // nccl_hang: the stuck ones now, and those that ended in this window.
  std::vector<const NcclHang*> hangs;
  for (const auto& [number, h] : t.hangs())
    if (h.outcome == NcclHang::Outcome::kStuck) hangs.push_back(&h);
  for (const NcclHang& h : ended_) hangs.push_back(&h);
  for (const NcclHang* h : hangs) {
    // From where the last window left it: the part before it was found
    // (the threshold, in an earlier window perhaps) comes with its first
    // push, so the pushes of one hang add up to how long it lasted.
    const bool stuck = h->outcome == NcclHang::Outcome::kStuck;
    auto charged = charged_.find(h->number);
    const uint64_t from = charged != charged_.end() ? charged->second : h->start_ns;
    const uint64_t to = std::max(from, stuck ? now_ns : h->end_ns);
    if (stuck) charged_[h->number] = to;
    else if (charged != charged_.end()) charged_.erase(charged);
    Built& b = profile(hang, h->pid, kNcclHangProfile);
    Profile& p = b.p;
    const StackId id = valid(h->stack) ? h->stack : h->sync_stack;
    Sample s = valid(id) ? b.make.Make(source.stacks.Get(id)) : b.make.Labelled(h->pid);
    if (s.frames.empty()) {
      // Its stack was not kept: the hang still shows, under its operation.
      symbolizer::Frame f;
      f.kind = symbolizer::FrameKind::kMarker;
      f.name = absl::StrCat("[", std::string(ApiName(h->api)), ": stack unknown]");
      p.frames.push_back(f);
      s.frames.push_back(static_cast<uint32_t>(p.frames.size() - 1));
    }
    // At least 1 ns: a hang that ended right at the window's start still
    // says so (its outcome) in the window it ended in.
    s.values = {static_cast<int64_t>(std::max<uint64_t>(1, to - from))};
    HangLabels(*h, s);
    p.samples.push_back(std::move(s));
  }
  ended_.clear();
  // Hangs gone from the tracker without an end said (forgotten with their
  // process): their marks go too.
  absl::erase_if(charged_, [&](const auto& kv) { return !t.hangs().contains(kv.first); });
  if (ended_dropped_)
    for (auto& [pid, b] : hang)
      b->p.comments.push_back(absl::StrCat("gpuflame: ", ended_dropped_, " ended hangs past ", kMaxEnded,
                                           " in one window were not pushed"));

  // nccl_straggler: each straggler rank's doing, this window's share.
  for (const auto& [id, c] : t.stragglers().communicators())
    for (const auto& [r, w] : c.ranks)
      for (const auto& [stack, ns] : w.doing_ns) {
        uint64_t& last = last_doing_[DoingKey{id, r, stack}];
        const uint64_t d = ns - std::min(ns, last);
        last = ns;
        if (!d || !valid(stack)) continue;
        Built& b = profile(straggler, w.pid, kNcclStragglerProfile);
        Sample s = b.make.Make(source.stacks.Get(stack));
        s.values = {static_cast<int64_t>(std::min<uint64_t>(d, INT64_MAX))};
        b.p.samples.push_back(std::move(s));
      }
  for (auto& [pid, b] : straggler)
    b->p.comments.push_back(
        "gpuflame: the straggler rank's CPU stacks while the other ranks of its communicator waited for it to enter "
        "a collective, weighted by their wait; lateness off the CPU is in gpuflame_nccl_straggler_wait_seconds_total "
        "(/metrics), not here");

  absl::flat_hash_map<pid_t, std::vector<Profile>> out;
  for (auto* m : {&nccl, &hang, &straggler})
    for (auto& [pid, b] : *m) out[pid].push_back(std::move(b->p));
  return out;
}

void NcclWindow::ForgetStacks(std::span<const StackId> stacks) {
  const absl::flat_hash_set<StackId> gone(stacks.begin(), stacks.end());
  for (StackId id : stacks) last_totals_.erase(id);
  for (NcclHang& h : ended_) {
    if (gone.contains(h.stack)) h.stack = StackTable::kNone;
    if (gone.contains(h.sync_stack)) h.sync_stack = StackTable::kNone;
  }
  absl::erase_if(last_doing_, [&](const auto& kv) { return gone.contains(std::get<2>(kv.first)); });
}

}  // namespace gpuflame::profiler
