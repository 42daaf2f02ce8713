// profiler/collectives/nccl_stragglers: the rank the others wait for, from
// the order ranks enter each collective (fed through NcclTracker, as the
// event loop feeds it), what it did meanwhile from its CPU samples, the
// bounds, and the report's line and JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "bpf/gpuflame_abi.h"
#include "profiler/collectives/nccl_straggler_report.h"
#include "profiler/collectives/nccl_tracker.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kS = 1000 * kMs;

NcclCall Call(pid_t pid, uint64_t ts, uint16_t api, uint64_t comm = 0) {
  NcclCall c;
  c.pid = pid;
  c.tid = static_cast<uint32_t>(pid);
  c.ts_ns = ts;
  c.api = api;
  c.comm = comm;
  c.datatype = 7;  // float32
  c.count = 1024;
  c.op = 0;
  c.stack = 1000 + static_cast<StackId>(pid);
  return c;
}

// |n| ranks, pid 10 * (rank + 1), communicator handle 0xa0 + rank.
void Ranks(NcclTracker& t, int n, int followed) {
  for (int r = 0; r < followed; r++) {
    NcclCall c = Call(10 * (r + 1), 0, GF_API_NCCL_COMM_INIT_RANK);
    c.count = static_cast<uint64_t>(n);
    c.peer = r;
    c.id_lo = 0x11;
    c.id_hi = 0x22;
    t.OnCall(c);
    t.OnReturn(c.pid, c.tid, 1, 0xa0 + r, 0);
  }
}

// Rank |r| enters an all-reduce at |ts| and returns at |ret|.
void AllReduce(NcclTracker& t, int r, uint64_t ts, uint64_t ret) {
  t.OnCall(Call(10 * (r + 1), ts, GF_API_NCCL_ALL_REDUCE, 0xa0 + r));
  t.OnReturn(10 * (r + 1), static_cast<uint32_t>(10 * (r + 1)), ret, 0, 0);
}

const NcclCommWaits& OnlyComm(const NcclTracker& t) { return t.stragglers().communicators().begin()->second; }

TEST(NcclStragglersTest, TheLastRankInIsTheStragglerAndItsSamplesSayWhatItDid) {
  NcclTracker t;
  Ranks(t, 2, 2);
  for (uint64_t step = 0; step < 5; step++) {
    const uint64_t t0 = (step + 1) * kS;
    AllReduce(t, 0, t0, t0 + 50 * kMs);
    // Rank 1 on the CPU in its loader (stack 7) for the 50 ms rank 0 waits.
    for (uint64_t i = 1; i <= 4; i++) t.OnCpuSample(20, t0 + i * 10 * kMs, 7);
    t.OnCpuSample(10, t0 + 20 * kMs, 8);  // rank 0's own samples are not the straggler's
    AllReduce(t, 1, t0 + 50 * kMs, t0 + 50 * kMs + 10);
  }
  ASSERT_EQ(t.stragglers().communicators().size(), 1u);
  const NcclCommWaits& c = OnlyComm(t);
  EXPECT_EQ(c.judged, 5u);
  EXPECT_EQ(c.balanced, 0u);
  EXPECT_EQ(c.ranks_seen, 2);
  const NcclRankWaits& late = c.ranks.at(1);
  EXPECT_EQ(late.last, 5u);
  EXPECT_EQ(late.held_ns, 5 * 50 * kMs);
  EXPECT_EQ(late.waited_ns, 0u);
  EXPECT_EQ(late.doing_ns.size(), 1u);
  EXPECT_EQ(late.doing_ns.at(7), 5 * 50 * kMs);  // every ns of the wait on the loader's samples
  EXPECT_EQ(late.off_cpu_ns, 0u);
  EXPECT_EQ(late.late_from_ns.at(1020), 5 * 50 * kMs);
  EXPECT_EQ(c.ranks.at(0).waited_ns, 5 * 50 * kMs);
  EXPECT_EQ(c.ranks.at(0).last, 0u);
}

// The agent retires exited processes: their stacks' time stays, by no
// stack, and their samples go.
TEST(NcclStragglersTest, RetiredStacksKeepTheirTimeAndRetiredProcessesTheirSamplesGo) {
  NcclTracker t;
  Ranks(t, 2, 2);
  AllReduce(t, 0, kS, kS + 50 * kMs);
  t.OnCpuSample(20, kS + 10 * kMs, 7);
  AllReduce(t, 1, kS + 50 * kMs, kS + 50 * kMs + 10);
  t.ForgetStacks({7, 1020});
  const NcclRankWaits& late = OnlyComm(t).ranks.at(1);
  EXPECT_FALSE(late.doing_ns.contains(7));
  EXPECT_EQ(late.doing_ns.at(StackTable::kNone), 50 * kMs);
  EXPECT_EQ(late.late_from_ns.at(StackTable::kNone), 50 * kMs);
  EXPECT_TRUE(t.stragglers().Wants(20));
  const pid_t gone[] = {20};
  t.ForgetProcesses(gone);
  EXPECT_FALSE(t.stragglers().Wants(20));
  EXPECT_TRUE(t.stragglers().Wants(10));
}

TEST(NcclStragglersTest, EntriesWithinAMillisecondHoldNobodyUp) {
  NcclTracker t;
  Ranks(t, 2, 2);
  AllReduce(t, 1, kS, kS + 10);
  AllReduce(t, 0, kS + 500'000, kS + 600'000);
  const NcclCommWaits& c = OnlyComm(t);
  EXPECT_EQ(c.judged, 1u);
  EXPECT_EQ(c.balanced, 1u);
  EXPECT_EQ(c.ranks.at(0).last, 0u);
  EXPECT_EQ(c.ranks.at(0).held_ns, 0u);
  EXPECT_EQ(c.ranks.at(1).waited_ns, 500'000u);  // its wait is still its wait
  StackTable stacks;
  FrameTable frames;
  EXPECT_TRUE(NcclStragglerLines(t.stragglers(), StackSource{stacks, frames}).empty());
}

TEST(NcclStragglersTest, ALatenessOffTheCpuIsSaidSoAndSharesAddUp) {
  NcclTracker t;
  Ranks(t, 3, 3);
  // Ranks 0 and 1 enter at 1 s and 1.01 s; rank 2 at 1.04 s: 40 + 30 ms held.
  AllReduce(t, 0, kS, kS + 50 * kMs);
  AllReduce(t, 1, kS + 10 * kMs, kS + 50 * kMs);
  t.OnCpuSample(30, kS + 5 * kMs, 1);
  t.OnCpuSample(30, kS + 6 * kMs, 2);
  t.OnCpuSample(30, kS + 2 * kMs, 3);  // out of order, as two CPUs may send them
  AllReduce(t, 2, kS + 40 * kMs, kS + 50 * kMs);
  const NcclRankWaits& late = OnlyComm(t).ranks.at(2);
  EXPECT_EQ(late.held_ns, 70 * kMs);
  uint64_t sum = 0;
  for (const auto& [stack, ns] : late.doing_ns) sum += ns;
  EXPECT_EQ(sum, 70 * kMs);
  EXPECT_EQ(late.doing_ns.size(), 3u);
  // The next one, with no sample of rank 2 meanwhile: off the CPU.
  AllReduce(t, 0, 2 * kS, 2 * kS + 50 * kMs);
  AllReduce(t, 1, 2 * kS, 2 * kS + 50 * kMs);
  AllReduce(t, 2, 2 * kS + 20 * kMs, 2 * kS + 50 * kMs);
  EXPECT_EQ(OnlyComm(t).ranks.at(2).off_cpu_ns, 40 * kMs);
}

TEST(NcclStragglersTest, ARankThatNeverEntersLeavesItsOperationUnjudgedAndOpenOnesAreBounded) {
  NcclTracker t;
  Ranks(t, 2, 2);
  for (uint64_t i = 0; i < NcclStragglers::kMaxOpen + 1; i++) AllReduce(t, 0, kS + i, kS + i + 1);
  EXPECT_EQ(t.stragglers().stats().operations_evicted, 1u);
  EXPECT_EQ(OnlyComm(t).unjudged, 1u);
  t.Finish(10 * kS);
  EXPECT_EQ(OnlyComm(t).unjudged, NcclStragglers::kMaxOpen + 1);
  EXPECT_EQ(OnlyComm(t).judged, 0u);
}

TEST(NcclStragglersTest, RanksOnOtherNodesAreSaidNotSeen) {
  NcclTracker t;
  Ranks(t, 4, 2);  // ranks 2 and 3 are elsewhere
  AllReduce(t, 0, kS, kS + 60 * kMs);
  AllReduce(t, 1, kS + 30 * kMs, kS + 60 * kMs);
  const NcclCommWaits& c = OnlyComm(t);
  EXPECT_EQ(c.judged, 1u);
  EXPECT_EQ(c.ranks_seen, 2);
  EXPECT_EQ(c.nranks, 4);
  StackTable stacks;
  FrameTable frames;
  const std::vector<std::string> lines = NcclStragglerLines(t.stragglers(), StackSource{stacks, frames});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "NCCL straggler: rank 1 (pid 20) of communicator 0000000000000022 entered last in 1 of 1 collectives; the "
            "others waited 0.030 s for it (among the 2 of its 4 ranks followed here: a rank elsewhere may be later "
            "still); no CPU samples of the ranks to say what it did (--cpu-hz 0?)");
}

TEST(NcclStragglersTest, TheReportNamesWhatTheStragglerRan) {
  StackTable stacks;
  FrameTable frames;
  StackInfo info;
  info.pid = 20;
  for (const char* name : {"Trainer > step", "DataLoader > __next__"}) {
    symbolizer::Frame f;
    f.kind = symbolizer::FrameKind::kPython;
    f.name = name;
    info.frames.push_back(frames.Intern(f));
  }
  const StackId loader = stacks.Insert("loader", info);
  NcclTracker t;
  Ranks(t, 2, 2);
  AllReduce(t, 0, kS, kS + 60 * kMs);
  t.OnCpuSample(20, kS + 10 * kMs, loader);
  AllReduce(t, 1, kS + 30 * kMs, kS + 60 * kMs);
  const std::vector<std::string> lines = NcclStragglerLines(t.stragglers(), StackSource{stacks, frames});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "NCCL straggler: rank 1 (pid 20) of communicator 0000000000000022 entered last in 1 of 1 collectives; the "
            "others waited 0.030 s for it; meanwhile it was on the CPU in Trainer > step › DataLoader > __next__ "
            "(100%)");
  const auto json =
      nlohmann::json::parse(NcclStragglersJson(t.stragglers(), StackSource{stacks, frames}, {{20, "python3"}}));
  const nlohmann::json& c = json["communicators"][0];
  EXPECT_EQ(c["straggler"], 1);
  EXPECT_EQ(c["ranks"][1]["process"], "python3");
  EXPECT_EQ(c["ranks"][1]["meanwhile"][0]["stack"], "Trainer > step;DataLoader > __next__");
  EXPECT_EQ(c["ranks"][1]["meanwhile"][0]["share"], 1.0);
  EXPECT_EQ(c["ranks"][0]["waited_seconds"], 0.03);
  EXPECT_FALSE(c["ranks"][0].contains("meanwhile"));
}

}  // namespace
}  // namespace gpuflame::profiler
