#include "profiler/collectives/nccl_straggler_report.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/json_string.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/forensics/stack_names.h"

namespace gpuflame::profiler {
namespace {

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

double Share(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0;
}

const std::vector<FrameId>* FramesOf(StackId id, StackSource source) {
  if (id == StackTable::kNone || id >= source.stacks.size()) return nullptr;
  const std::vector<FrameId>& f = source.stacks.Get(id).frames;
  return f.empty() ? nullptr : &f;
}

// The communicators in a stable order (by ID), and each one's straggler:
// the rank that held the others up longest, if any did.
std::vector<const NcclCommWaits*> Sorted(const NcclStragglers& s) {
  std::vector<const NcclCommWaits*> out;
  for (const auto& [id, c] : s.communicators()) out.push_back(&c);
  std::sort(out.begin(), out.end(), [](const NcclCommWaits* a, const NcclCommWaits* b) {
    return std::pair{a->id.hi, a->id.lo} < std::pair{b->id.hi, b->id.lo};
  });
  return out;
}

const NcclRankWaits* StragglerOf(const NcclCommWaits& c) {
  const NcclRankWaits* best = nullptr;
  for (const auto& [rank, r] : c.ranks)
    if (r.held_ns > 0 && (!best || r.held_ns > best->held_ns)) best = &r;
  return best;
}

// The top |n| names of |by|'s stacks, largest first: stacks that name the
// same (samples of one loop at different lines or native leaves) are one
// row. Time of stacks without frames is left out (the shares say the rest).
template <typename NameFn>
std::vector<std::pair<std::string, uint64_t>> Top(const absl::flat_hash_map<StackId, uint64_t>& by, StackSource source,
                                                  size_t n, NameFn name) {
  absl::flat_hash_map<std::string, uint64_t> named;
  for (const auto& [id, ns] : by)
    if (const std::vector<FrameId>* f = FramesOf(id, source)) named[name(*f)] += ns;
  std::vector<std::pair<std::string, uint64_t>> rows(named.begin(), named.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

// Rows as [{"stack": "a;b;c", "share": 0.93}, ...].
std::string RowsJson(const std::vector<std::pair<std::string, uint64_t>>& rows, uint64_t whole) {
  std::string out = "[";
  for (size_t j = 0; j < rows.size(); j++)
    absl::StrAppend(&out, j ? ", " : "", "{\"stack\": ", base::JsonString(rows[j].first),
                    ", \"share\": ", absl::StrFormat("%.4f", Share(rows[j].second, whole)), "}");
  return out + "]";
}

}  // namespace

std::string NcclStragglersJson(const NcclStragglers& s, StackSource source,
                               const absl::flat_hash_map<pid_t, std::string>& comm) {
  const NcclStragglerStats& st = s.stats();
  std::string out =
      absl::StrCat("{\"late_threshold_seconds\": ", absl::StrFormat("%.3f", Seconds(NcclStragglers::kLateNs)),
                   ", \"cpu_samples\": ", st.samples, ", \"dropped\": {\"operations\": ", st.operations_evicted,
                   ", \"cpu_samples\": ", st.samples_evicted, ", \"communicators\": ", st.communicators_dropped,
                   "}, \"communicators\": [");
  const std::vector<const NcclCommWaits*> comms = Sorted(s);
  for (size_t i = 0; i < comms.size(); i++) {
    const NcclCommWaits& c = *comms[i];
    const NcclRankWaits* straggler = StragglerOf(c);
    absl::StrAppend(&out, i ? ", " : "", "{\"id\": \"", NcclCommIdHex(c.id), "\", \"nranks\": ", c.nranks,
                    ", \"ranks_seen\": ", c.ranks_seen, ", \"collectives_judged\": ", c.judged,
                    ", \"collectives_balanced\": ", c.balanced, ", \"collectives_unjudged\": ", c.unjudged,
                    ", \"straggler\": ", straggler ? absl::StrCat(straggler->rank) : "null", ", \"ranks\": [");
    bool first = true;
    for (const auto& [rank, r] : c.ranks) {
      auto name = comm.find(r.pid);
      absl::StrAppend(&out, first ? "" : ", ", "{\"rank\": ", r.rank, ", \"pid\": ", r.pid,
                      ", \"process\": ", base::JsonString(name == comm.end() ? "" : name->second),
                      ", \"collectives\": ", r.operations, ", \"entered_last\": ", r.last,
                      ", \"others_waited_seconds\": ", absl::StrFormat("%.6f", Seconds(r.held_ns)),
                      ", \"waited_seconds\": ", absl::StrFormat("%.6f", Seconds(r.waited_ns)));
      first = false;
      if (r.held_ns == 0) {
        out += "}";
        continue;
      }
      // What it did while the others waited: CPU stacks, the rest said by why.
      auto folded = [&source](const std::vector<FrameId>& f) { return FoldedStack(f, source.frames); };
      absl::StrAppend(
          &out, ", \"meanwhile\": ", RowsJson(Top(r.doing_ns, source, 10, folded), r.held_ns),
          ", \"meanwhile_not_on_cpu_share\": ", absl::StrFormat("%.4f", Share(r.off_cpu_ns, r.held_ns)),
          ", \"meanwhile_before_samples_kept_share\": ", absl::StrFormat("%.4f", Share(r.beyond_samples_ns, r.held_ns)),
          ", \"entered_late_from\": ", RowsJson(Top(r.late_from_ns, source, 5, folded), r.held_ns), "}");
    }
    out += "]}";
  }
  out += "]}";
  return out;
}

std::vector<std::string> NcclStragglerLines(const NcclStragglers& s, StackSource source) {
  std::vector<std::string> out;
  for (const NcclCommWaits* c : Sorted(s)) {
    const NcclRankWaits* r = StragglerOf(*c);
    if (!r) continue;
    std::string line = absl::StrFormat(
        "NCCL straggler: rank %d (pid %d) of communicator %s entered last in %d of %d collectives; the others "
        "waited %.3f s for it",
        r->rank, r->pid, NcclCommIdHex(c->id).substr(0, 16), r->last, c->judged, Seconds(r->held_ns));
    if (c->ranks_seen < c->nranks)
      absl::StrAppend(&line, " (among the ", c->ranks_seen, " of its ", c->nranks,
                      " ranks followed here: a rank elsewhere may be later still)");
    const auto top = Top(r->doing_ns, source, 1,
                         [&source](const std::vector<FrameId>& f) { return ShortStack(f, source.frames, 4); });
    if (!top.empty()) {
      absl::StrAppend(&line, "; meanwhile it was on the CPU in ", top[0].first,
                      absl::StrFormat(" (%.0f%%)", 100 * Share(top[0].second, r->held_ns)));
    } else if (r->off_cpu_ns > 0) {
      absl::StrAppend(&line, s.stats().samples ? "; meanwhile it was not on the CPU (sleeping or blocked)"
                                               : "; no CPU samples of the ranks to say what it did (--cpu-hz 0?)");
    }
    out.push_back(std::move(line));
  }
  return out;
}

namespace {

// Per rank, its totals over a communicator's steps, and the steps it was the straggler of.
struct StepTotals {
  pid_t pid = 0;
  uint64_t compute_ns = 0, nccl_ns = 0, waiting_ns = 0, straggler_steps = 0;
};

std::map<int, StepTotals> Totals(const NcclCommSteps& c) {
  std::map<int, StepTotals> out;
  for (const NcclStep& step : c.steps) {
    for (const NcclStepRank& r : step.ranks) {
      StepTotals& t = out[r.rank];
      t.pid = r.pid;
      t.compute_ns += r.compute_ns;
      t.nccl_ns += r.nccl_ns;
      t.waiting_ns += r.waiting_ns;
    }
    if (step.straggler >= 0) out[step.straggler].straggler_steps++;
  }
  return out;
}

std::string SecondsJson(uint64_t ns) { return absl::StrFormat("%.6f", Seconds(ns)); }

}  // namespace

std::string NcclStepsJson(const NcclSteps& s, StackSource source) {
  std::string out =
      absl::StrCat("{\"by\": \"collective cadence\", \"dropped\": {\"entries\": ", s.stats().entries_dropped,
                   ", \"calls\": ", s.stats().calls_dropped, "}, \"communicators\": [");
  const std::vector<NcclCommSteps> all = s.Steps();
  for (size_t i = 0; i < all.size(); i++) {
    const NcclCommSteps& c = all[i];
    const std::vector<FrameId>* anchor = FramesOf(c.anchor, source);
    absl::StrAppend(&out, i ? ", " : "", "{\"id\": \"", NcclCommIdHex(c.id), "\", \"nranks\": ", c.nranks,
                    ", \"anchor\": ", anchor ? base::JsonString(FoldedStack(*anchor, source.frames)) : "null",
                    ", \"steps\": ", c.steps.size(), ", \"ranks\": [");
    bool first = true;
    for (const auto& [rank, t] : Totals(c)) {
      absl::StrAppend(
          &out, first ? "" : ", ", "{\"rank\": ", rank, ", \"pid\": ", t.pid,
          ", \"compute_seconds\": ", SecondsJson(t.compute_ns), ", \"nccl_seconds\": ", SecondsJson(t.nccl_ns),
          ", \"waiting_seconds\": ", SecondsJson(t.waiting_ns), ", \"straggler_steps\": ", t.straggler_steps, "}");
      first = false;
    }
    out += "], \"per_step\": [";
    for (size_t k = 0; k < c.steps.size() && k < kMaxStepsJson; k++) {
      const NcclStep& step = c.steps[k];
      absl::StrAppend(&out, k ? ", " : "", "{\"step\": ", step.number,
                      ", \"straggler\": ", step.straggler >= 0 ? absl::StrCat(step.straggler) : "null",
                      ", \"ranks\": [");
      for (size_t j = 0; j < step.ranks.size(); j++) {
        const NcclStepRank& r = step.ranks[j];
        absl::StrAppend(&out, j ? ", " : "", "{\"rank\": ", r.rank, ", \"seconds\": ", SecondsJson(r.step_ns),
                        ", \"compute_seconds\": ", SecondsJson(r.compute_ns),
                        ", \"nccl_seconds\": ", SecondsJson(r.nccl_ns),
                        ", \"waiting_seconds\": ", SecondsJson(r.waiting_ns), "}");
      }
      out += "]}";
    }
    absl::StrAppend(
        &out, "], \"per_step_omitted\": ", c.steps.size() > kMaxStepsJson ? c.steps.size() - kMaxStepsJson : 0, "}");
  }
  return out + "]}";
}

std::vector<std::string> NcclStepLines(const NcclSteps& s, StackSource source) {
  std::vector<std::string> out;
  for (const NcclCommSteps& c : s.Steps()) {
    if (c.steps.empty()) continue;
    const std::vector<FrameId>* anchor = FramesOf(c.anchor, source);
    std::string line = absl::StrCat(
        "NCCL steps of communicator ", NcclCommIdHex(c.id).substr(0, 16), " (by collective cadence, from one ",
        anchor ? ShortStack(*anchor, source.frames, 3) : "collective", " to the next): ", c.steps.size(), " steps");
    const std::map<int, StepTotals> totals = Totals(c);
    int straggler = -1;
    uint64_t most = 0;
    for (const auto& [rank, t] : totals)
      if (t.straggler_steps > most) most = t.straggler_steps, straggler = rank;
    if (straggler >= 0) absl::StrAppend(&line, "; rank ", straggler, " the straggler in ", most);
    const auto n = static_cast<double>(c.steps.size());
    line += "; a step, on average:";
    bool first = true;
    for (const auto& [rank, t] : totals) {
      absl::StrAppend(
          &line, first ? " " : "; ",
          absl::StrFormat("rank %d compute %.1f ms, waiting %.1f ms", rank, static_cast<double>(t.compute_ns) / 1e6 / n,
                          static_cast<double>(t.waiting_ns) / 1e6 / n));
      first = false;
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace gpuflame::profiler
