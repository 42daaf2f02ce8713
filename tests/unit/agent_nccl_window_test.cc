// agent/nccl_window: the agent's per-window NCCL profiles. `nccl` holds
// only the window's calls (the tracker's totals are since the start);
// `nccl_hang` is pushed while a hang is stuck and in the window it ended,
// its pushes adding up to how long it lasted, with its details as labels;
// `nccl_straggler` holds what the straggler ran while the others waited,
// this window's share; the rank labels name the process's communicator and
// rank; retired stacks are forgotten.
#include <gtest/gtest.h>

#include <map>
#include <span>
#include <string>
#include <vector>

#include "agent/metrics_server.h"
#include "agent/nccl_window.h"
#include "agent/self_metrics.h"
#include "bpf/gpuflame_abi.h"
#include "profiler/collectives/nccl_report.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kS = 1000 * kMs;

struct Tables {
  StackTable stacks;
  FrameTable frames;
  StackId Stack(pid_t pid, std::vector<std::string> names) {
    StackInfo info;
    info.pid = pid;
    std::string raw = std::to_string(pid);
    for (const std::string& name : names) {
      symbolizer::Frame f;
      f.kind = symbolizer::FrameKind::kPython;
      f.name = name;
      info.frames.push_back(frames.Intern(f));
      raw += ";" + name;
    }
    return stacks.Insert(raw, info);
  }
  StackSource source() const { return {stacks, frames}; }
};

NcclCall Call(pid_t pid, uint64_t ts, uint16_t api, uint64_t comm, StackId stack) {
  NcclCall c;
  c.pid = pid;
  c.tid = static_cast<uint32_t>(pid);
  c.ts_ns = ts;
  c.api = api;
  c.comm = comm;
  c.datatype = 7;  // float32
  c.count = 256;
  c.op = GF_NCCL_NO_OP;
  c.stack = stack;
  return c;
}

// Ranks 0 and 1 (pids 10, 20) of communicator 0x2222...0x1111 initialised.
void TwoRanks(NcclTracker& t) {
  for (int r = 0; r < 2; r++) {
    NcclCall c = Call(10 * (r + 1), 0, GF_API_NCCL_COMM_INIT_RANK, 0, StackTable::kNone);
    c.count = 2;
    c.peer = r;
    c.id_lo = 0x1111;
    c.id_hi = 0x2222;
    t.OnCall(c);
    t.OnReturn(c.pid, c.tid, 1, 0xa0 + r, 0);
  }
}

std::string Frames(const Profile& p, const Sample& s) {
  std::string out;
  for (uint32_t f : s.frames) out += (out.empty() ? "" : ";") + p.frames[f].name;
  return out;
}

std::string LabelOf(const Sample& s, const std::string& key) {
  for (const Label& l : s.labels)
    if (l.key == key) return l.str;
  return "";
}

const Profile* Find(const absl::flat_hash_map<pid_t, std::vector<Profile>>& out, pid_t pid, const std::string& name) {
  auto it = out.find(pid);
  if (it == out.end()) return nullptr;
  for (const Profile& p : it->second)
    if (p.name == name) return &p;
  return nullptr;
}

TEST(AgentNcclWindowTest, TheNcclProfileHoldsOnlyTheWindowsCalls) {
  Tables tables;
  const StackId send = tables.Stack(10, {"Trainer > step", "Comm > send", "ncclAllReduce"});
  NcclTracker t;
  TwoRanks(t);
  NcclWindow w;
  t.OnCall(Call(10, 2 * kS, GF_API_NCCL_ALL_REDUCE, 0xa0, send));
  t.OnReturn(10, 10, 2 * kS + 500, 0, 0);
  auto out = w.Close(t, tables.source(), {}, 0, kS, 3 * kS);
  const Profile* p = Find(out, 10, "nccl");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->samples.size(), 1u);
  EXPECT_EQ(Frames(*p, p->samples[0]), "Trainer > step;Comm > send;ncclAllReduce");
  EXPECT_EQ(p->samples[0].values, (std::vector<int64_t>{1, 500, 1024, 0}));
  // The next window: its own call alone.
  t.OnCall(Call(10, 3 * kS, GF_API_NCCL_ALL_REDUCE, 0xa0, send));
  t.OnReturn(10, 10, 3 * kS + 300, 0, 0);
  out = w.Close(t, tables.source(), {}, 0, kS, 4 * kS);
  p = Find(out, 10, "nccl");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->samples[0].values, (std::vector<int64_t>{1, 300, 1024, 0}));
  // None: no profile.
  EXPECT_EQ(Find(w.Close(t, tables.source(), {}, 0, kS, 5 * kS), 10, "nccl"), nullptr);
  // A retired stack's id reused by another process: counted from zero.
  w.ForgetStacks(std::vector<StackId>{send});
  EXPECT_EQ(Find(w.Close(t, tables.source(), {}, 0, kS, 6 * kS), 10, "nccl")->samples[0].values,
            (std::vector<int64_t>{2, 800, 2048, 0}));
}

// The kernels' GPU time comes with CUPTI's records, after the call
// returned: the window they came in has it, alone.
TEST(AgentNcclWindowTest, GpuTimeGoesToTheWindowItsRecordsCameIn) {
  Tables tables;
  const StackId send = tables.Stack(10, {"Trainer > step", "Comm > send", "ncclAllReduce"});
  NcclTracker t;
  TwoRanks(t);
  NcclWindow w;
  t.OnCall(Call(10, 2 * kS, GF_API_NCCL_ALL_REDUCE, 0xa0, send));
  t.OnLaunch(10, 10, 77, 2 * kS + 1);
  t.OnReturn(10, 10, 2 * kS + 500, 0, 0);
  auto out = w.Close(t, tables.source(), {}, 0, kS, 3 * kS);
  ASSERT_NE(Find(out, 10, "nccl"), nullptr);
  EXPECT_EQ(Find(out, 10, "nccl")->samples[0].values, (std::vector<int64_t>{1, 500, 1024, 0}));
  gf_kernel_record k{};
  k.kind = GF_GPU_KERNEL;
  k.correlation = 77;
  k.start_ns = 5000;
  k.end_ns = 5000 + 7000;
  k.weight = 10;  // duty-cycled activity: it stands for 10
  t.OnGpuRecords(10, std::span<const gf_kernel_record>(&k, 1));
  out = w.Close(t, tables.source(), {}, 0, kS, 4 * kS);
  const Profile* p = Find(out, 10, "nccl");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->sample_types.size(), 4u);
  EXPECT_EQ(p->sample_types[3].type, "gpu_time");
  EXPECT_EQ(p->samples[0].values, (std::vector<int64_t>{0, 0, 0, 70000}));
}

TEST(AgentNcclWindowTest, RankLabelsNameTheCommunicatorAndRank) {
  NcclTracker t;
  TwoRanks(t);
  using L = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(NcclRankLabels(t, 20),
            (L{{"nccl_communicator", "0000000000002222"}, {"nccl_rank", "1"}, {"nccl_ranks", "2"}}));
  EXPECT_TRUE(NcclRankLabels(t, 30).empty());
}

TEST(AgentNcclWindowTest, AHangIsPushedWhileStuckAndWhenOverAddingUpToItsLength) {
  Tables tables;
  const StackId send = tables.Stack(10, {"Comm > exchange", "Comm > send", "ncclSend"});
  NcclTracker t(kS);
  t.ForgetEndedHangs();  // as the agent's
  TwoRanks(t);
  NcclWindow w;
  NcclCall c = Call(10, 3 * kS, GF_API_NCCL_SEND, 0xa0, send);
  c.peer = 1;
  t.OnCall(c);
  t.Tick(4 * kS + kS / 2);
  ASSERT_EQ(t.TakeFound().size(), 1u);
  auto out = w.Close(t, tables.source(), {}, 0, kS, 5 * kS);
  const Profile* p = Find(out, 10, kNcclHangProfile);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->samples.size(), 1u);
  const Sample& stuck = p->samples[0];
  EXPECT_EQ(Frames(*p, stuck), "Comm > exchange;Comm > send;ncclSend");
  EXPECT_EQ(stuck.values[0], static_cast<int64_t>(2 * kS));  // from its entry: the part before it was found too
  EXPECT_EQ(LabelOf(stuck, "operation"), "ncclSend");
  EXPECT_EQ(LabelOf(stuck, "outcome"), "stuck");
  EXPECT_EQ(LabelOf(stuck, "side"), "call");
  EXPECT_EQ(LabelOf(stuck, "nccl_rank"), "0");
  EXPECT_EQ(LabelOf(stuck, "peer"), "1");
  EXPECT_EQ(LabelOf(stuck, "missing_ranks"), "1");
  EXPECT_EQ(LabelOf(stuck, "nccl_communicator"), "0000000000002222");
  // Still stuck: the next window's second.
  out = w.Close(t, tables.source(), {}, 0, kS, 6 * kS);
  EXPECT_EQ(Find(out, 10, kNcclHangProfile)->samples[0].values[0], static_cast<int64_t>(kS));
  // Rank 1 comes: over at 8.5 s, 5.5 s in all.
  NcclCall recv = Call(20, 8 * kS, GF_API_NCCL_RECV, 0xa1, StackTable::kNone);
  recv.peer = 0;
  t.OnCall(recv);
  t.OnReturn(10, 10, 8 * kS + kS / 2, 0, 0);
  t.OnReturn(20, 20, 8 * kS + kS / 2, 0, 0);  // else its receive, 1 s in at the tick, is a hang of its own
  t.Tick(9 * kS);
  w.OnHangsEnded(t.TakeEnded());
  EXPECT_TRUE(t.hangs().empty());
  out = w.Close(t, tables.source(), {}, 0, kS, 9 * kS);
  p = Find(out, 10, kNcclHangProfile);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->samples.size(), 1u);
  EXPECT_EQ(p->samples[0].values[0], static_cast<int64_t>(2 * kS + kS / 2));
  EXPECT_EQ(LabelOf(p->samples[0], "outcome"), "returned");
  // Over: no more pushes.
  EXPECT_EQ(Find(w.Close(t, tables.source(), {}, 0, kS, 10 * kS), 10, kNcclHangProfile), nullptr);
}

TEST(AgentNcclWindowTest, ManyMissingRanksAreNamedUpToTheBound) {
  Tables tables;
  const StackId ar = tables.Stack(10, {"step", "ncclAllReduce"});
  NcclTracker t(kS);
  t.ForgetEndedHangs();
  // 12 ranks, rank 0 here alone: 11 missing.
  NcclCall init = Call(10, 0, GF_API_NCCL_COMM_INIT_RANK, 0, StackTable::kNone);
  init.count = 12;
  init.peer = 0;
  init.id_lo = 1;
  t.OnCall(init);
  t.OnReturn(10, 10, 1, 0xa0, 0);
  t.OnCall(Call(10, kS, GF_API_NCCL_ALL_REDUCE, 0xa0, ar));
  t.Tick(3 * kS);
  NcclWindow w;
  auto out = w.Close(t, tables.source(), {}, 0, kS, 3 * kS);
  const Profile* p = Find(out, 10, kNcclHangProfile);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->samples.size(), 1u);
  // Ranks no process here holds are named by rank: the first 8 of the 11,
  // then how many more.
  EXPECT_EQ(LabelOf(p->samples[0], "missing_ranks"), "1,2,3,4,5,6,7,8,+3");
  EXPECT_EQ(LabelOf(p->samples[0], "peer"), "") << "a collective has no peer";
  EXPECT_LE(p->samples[0].labels.size(), kNcclHangLabels);
}

TEST(AgentNcclWindowTest, TheStragglersDoingIsPushedPerWindow) {
  Tables tables;
  const StackId loader = tables.Stack(20, {"Trainer > step", "DataLoader > __next__"});
  NcclTracker t;
  TwoRanks(t);
  NcclWindow w;
  auto step = [&](uint64_t t0) {
    t.OnCall(Call(10, t0, GF_API_NCCL_ALL_REDUCE, 0xa0, StackTable::kNone));
    t.OnCpuSample(20, t0 + 10 * kMs, loader);
    t.OnCall(Call(20, t0 + 30 * kMs, GF_API_NCCL_ALL_REDUCE, 0xa1, StackTable::kNone));
    t.OnReturn(10, 10, t0 + 40 * kMs, 0, 0);
    t.OnReturn(20, 20, t0 + 40 * kMs, 0, 0);
  };
  step(2 * kS);
  auto out = w.Close(t, tables.source(), {}, 0, kS, 3 * kS);
  EXPECT_EQ(Find(out, 10, kNcclStragglerProfile), nullptr) << "rank 0 held no one up";
  const Profile* p = Find(out, 20, kNcclStragglerProfile);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->samples.size(), 1u);
  EXPECT_EQ(Frames(*p, p->samples[0]), "Trainer > step;DataLoader > __next__");
  EXPECT_EQ(p->samples[0].values[0], static_cast<int64_t>(30 * kMs));
  step(3 * kS);
  step(3 * kS + 100 * kMs);
  out = w.Close(t, tables.source(), {}, 0, kS, 4 * kS);
  EXPECT_EQ(Find(out, 20, kNcclStragglerProfile)->samples[0].values[0], static_cast<int64_t>(60 * kMs));
  EXPECT_EQ(Find(w.Close(t, tables.source(), {}, 0, kS, 5 * kS), 20, kNcclStragglerProfile), nullptr);
}

// The straggler counters outlive the ranks' retirement (a scrape every 15 s
// would miss a short job's): kept 10 minutes, then gone; bounded in count,
// the ranks retired longest ago dropped first.
TEST(AgentNcclRankTotalsTest, ARetiredRanksStragglerCountersStayTenMinutesThenGo) {
  Tables tables;
  const StackId loader = tables.Stack(20, {"Trainer > step", "DataLoader > __next__"});
  NcclTracker t;
  TwoRanks(t);
  t.OnCall(Call(10, 2 * kS, GF_API_NCCL_ALL_REDUCE, 0xa0, StackTable::kNone));
  t.OnCpuSample(20, 2 * kS + 10 * kMs, loader);
  t.OnCall(Call(20, 2 * kS + 30 * kMs, GF_API_NCCL_ALL_REDUCE, 0xa1, StackTable::kNone));
  t.OnReturn(10, 10, 2 * kS + 40 * kMs, 0, 0);
  t.OnReturn(20, 20, 2 * kS + 40 * kMs, 0, 0);
  NcclRankTotals kept;
  kept.Update(t, 3 * kS);  // before the retirement, as the agent's window close
  t.ForgetProcesses(std::vector<pid_t>{10, 20});
  ASSERT_TRUE(t.stragglers().communicators().empty());
  kept.Update(t, 4 * kS);
  AgentStats s;
  kept.Fill(s);
  ASSERT_EQ(s.nccl_ranks.size(), 2u);
  EXPECT_EQ(s.nccl_ranks[0].rank, 1) << "the straggler first";
  EXPECT_EQ(s.nccl_ranks[0].communicator, "0000000000002222");
  EXPECT_EQ(s.nccl_ranks[0].held_ns, 30 * kMs);
  EXPECT_EQ(s.nccl_ranks[0].last, 1u);
  EXPECT_EQ(s.nccl_ranks[1].waited_ns, 30 * kMs);
  // In the exposition: each family once (its HELP and TYPE), a series per rank.
  const std::string text = PrometheusText(SelfMetrics(s));
  const std::string series =
      "gpuflame_nccl_straggler_wait_seconds_total{communicator=\"0000000000002222\",rank=\"1\"} ";
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + series.size())), 0.03, 1e-9);
  for (const char* family : {"gpuflame_nccl_straggler_wait_seconds_total", "gpuflame_nccl_rank_wait_seconds_total",
                             "gpuflame_nccl_straggler_collectives_total"}) {
    const std::string help = std::string("# HELP ") + family + " ";
    EXPECT_EQ(text.find(help), text.rfind(help)) << family << " said twice:\n" << text;
  }
  // 10 minutes after the last reading that saw them: still there; then gone.
  kept.Update(t, 3 * kS + NcclRankTotals::kKeepNs);
  kept.Fill(s);
  EXPECT_EQ(s.nccl_ranks.size(), 2u);
  kept.Update(t, 3 * kS + NcclRankTotals::kKeepNs + 1);
  kept.Fill(s);
  EXPECT_TRUE(s.nccl_ranks.empty());
  EXPECT_EQ(PrometheusText(SelfMetrics(s)).find("gpuflame_nccl_straggler_wait_seconds_total{"), std::string::npos);
  EXPECT_EQ(kept.dropped(), 0u) << "expired, not dropped";
}

TEST(AgentNcclRankTotalsTest, PastTheBoundTheRanksRetiredLongestAgoGoFirst) {
  NcclRankTotals kept;
  // Jobs of one rank each (so every collective is judged at once), 600 at
  // a time, each batch retired before the next.
  auto batch = [&](uint64_t first, uint64_t now) {
    NcclTracker t;
    std::vector<pid_t> pids;
    for (uint64_t j = first; j < first + 600; j++) {
      const auto pid = static_cast<pid_t>(1000 + j);
      NcclCall init = Call(pid, 0, GF_API_NCCL_COMM_INIT_RANK, 0, StackTable::kNone);
      init.count = 1;
      init.peer = 0;
      init.id_hi = j + 1;  // the labels' 16 hex digits
      t.OnCall(init);
      t.OnReturn(pid, init.tid, 1, 0xa0, 0);
      t.OnCall(Call(pid, kS, GF_API_NCCL_ALL_REDUCE, 0xa0, StackTable::kNone));
      t.OnReturn(pid, init.tid, kS + 1, 0, 0);
      pids.push_back(pid);
    }
    kept.Update(t, now);
    t.ForgetProcesses(pids);
    kept.Update(t, now + 1);
  };
  batch(0, 10 * kS);
  EXPECT_EQ(kept.size(), 600u);
  batch(600, 20 * kS);
  EXPECT_EQ(kept.size(), NcclRankTotals::kMaxKept);
  EXPECT_EQ(kept.dropped(), 1200u - NcclRankTotals::kMaxKept);
  AgentStats s;
  kept.Fill(s);
  EXPECT_EQ(s.nccl_retired_ranks_dropped, 1200u - NcclRankTotals::kMaxKept);
  EXPECT_EQ(s.nccl_ranks.size(), AgentStats::kMaxStragglerSeries);
  EXPECT_EQ(s.nccl_ranks_omitted, NcclRankTotals::kMaxKept - AgentStats::kMaxStragglerSeries);
  // The second batch is whole: the first one's went, 176 of them.
  size_t first = 0, second = 0;
  for (uint64_t j = 0; j < 1200; j++) (j < 600 ? first : second) += kept.contains(NcclCommId{0, j + 1}, 0);
  EXPECT_EQ(second, 600u);
  EXPECT_EQ(first, NcclRankTotals::kMaxKept - 600);
}

}  // namespace
}  // namespace gpuflame::profiler
