// profiler/collectives/nccl_steps.h: steps found from the collectives'
// cadence, each rank's compute, NCCL and waiting time per step, and each
// step's straggler, to the nanosecond.
#include <gtest/gtest.h>

#include <vector>

#include "profiler/collectives/nccl_steps.h"
#include "profiler/collectives/nccl_straggler_report.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kMs = 1'000'000;
const NcclCommId kId{0x11, 0x22};
constexpr StackId kAllReduce = 3, kBroadcast = 4, kInit = 5;

// Rank |rank| (pid 10 + rank) enters its |*sequence|-th collective at |at|
// ms from |stack| and returns at |back| ms.
void Collective(NcclSteps& s, int rank, uint64_t* sequence, uint64_t at, uint64_t back, StackId stack) {
  s.OnCollective(kId, 2, rank, 10 + rank, ++*sequence, at * kMs, stack);
  s.OnCall(10 + rank, at * kMs, back * kMs);
}

// Four steps of 100 ms after a set-up broadcast: an all-reduce (the
// anchor) and a broadcast. Rank 1 computes 50 ms more before its
// all-reduce, so rank 0 waits 50 ms in each; the broadcast is balanced. A
// fifth all-reduce starts a step with no end.
TEST(NcclStepsTest, TheFirstCallSiteThatComesRoundAgainStartsEachStep) {
  NcclSteps s;
  s.Enable();
  uint64_t seq[2] = {0, 0};
  for (int rank : {0, 1}) Collective(s, rank, &seq[rank], 1, 2, kInit);  // a set-up broadcast, from its own site
  for (uint64_t k = 0; k < 5; k++) {
    const uint64_t t = 100 + 100 * k;
    Collective(s, 0, &seq[0], t, t + 51, kAllReduce);
    Collective(s, 1, &seq[1], t + 50, t + 51, kAllReduce);
    if (k == 4) break;
    for (int rank : {0, 1}) Collective(s, rank, &seq[rank], t + 60, t + 61, kBroadcast);
  }
  const std::vector<NcclCommSteps> all = s.Steps();
  ASSERT_EQ(all.size(), 1u);
  const NcclCommSteps& c = all[0];
  EXPECT_EQ(c.anchor, kAllReduce);
  ASSERT_EQ(c.steps.size(), 4u);  // the fifth all-reduce's step has no end
  for (size_t k = 0; k < 4; k++) {
    const NcclStep& step = c.steps[k];
    EXPECT_EQ(step.number, k + 1);
    EXPECT_EQ(step.start_ns, (100 + 100 * k) * kMs);
    EXPECT_EQ(step.straggler, 1);
    ASSERT_EQ(step.ranks.size(), 2u);
    const NcclStepRank& r0 = step.ranks[0];
    EXPECT_EQ(r0.rank, 0);
    EXPECT_EQ(r0.pid, 10);
    EXPECT_EQ(r0.step_ns, 100 * kMs);
    EXPECT_EQ(r0.nccl_ns, 52 * kMs);  // 51 ms in the all-reduce (50 of them waiting), 1 in the broadcast
    EXPECT_EQ(r0.compute_ns, 48 * kMs);
    EXPECT_EQ(r0.waiting_ns, 50 * kMs);
    EXPECT_EQ(r0.held_ns, 0u);
    const NcclStepRank& r1 = step.ranks[1];
    EXPECT_EQ(r1.rank, 1);
    EXPECT_EQ(r1.step_ns, 100 * kMs);  // from its all-reduce at t + 50 to the next
    EXPECT_EQ(r1.nccl_ns, 2 * kMs);
    EXPECT_EQ(r1.compute_ns, 98 * kMs);
    EXPECT_EQ(r1.waiting_ns, 0u);
    EXPECT_EQ(r1.held_ns, 50 * kMs);
  }
}

TEST(NcclStepsTest, TheReportsSayEachRanksTotalsAndTheStraggler) {
  NcclSteps s;
  s.Enable();
  uint64_t seq[2] = {0, 0};
  for (uint64_t k = 0; k < 5; k++) {
    const uint64_t t = 100 + 100 * k;
    Collective(s, 0, &seq[0], t, t + 51, kAllReduce);
    Collective(s, 1, &seq[1], t + 50, t + 51, kAllReduce);
  }
  StackTable stacks;
  FrameTable frames;
  const StackSource source{stacks, frames};
  const std::string json = NcclStepsJson(s, source);
  EXPECT_NE(json.find("\"steps\": 4, \"ranks\": [{\"rank\": 0, \"pid\": 10, \"compute_seconds\": 0.196000, "
                      "\"nccl_seconds\": 0.204000, \"waiting_seconds\": 0.200000, \"straggler_steps\": 0}, "
                      "{\"rank\": 1, \"pid\": 11, \"compute_seconds\": 0.396000, \"nccl_seconds\": 0.004000, "
                      "\"waiting_seconds\": 0.000000, \"straggler_steps\": 4}]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"step\": 1, \"straggler\": 1, \"ranks\": [{\"rank\": 0, \"seconds\": 0.100000, "
                      "\"compute_seconds\": 0.049000, \"nccl_seconds\": 0.051000, \"waiting_seconds\": 0.050000}"),
            std::string::npos)
      << json;
  const std::vector<std::string> lines = NcclStepLines(s, source);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "NCCL steps of communicator 0000000000000022 (by collective cadence, from one collective to the next): 4 "
            "steps; rank 1 the straggler in 4; a step, on average: rank 0 compute 49.0 ms, waiting 50.0 ms; rank 1 "
            "compute 99.0 ms, waiting 0.0 ms");
}

TEST(NcclStepsTest, ABalancedStepHasNoStraggler) {
  NcclSteps s;
  s.Enable();
  uint64_t seq[2] = {0, 0};
  for (uint64_t k = 0; k < 3; k++)
    for (int rank : {0, 1}) Collective(s, rank, &seq[rank], 100 * k, 100 * k + 1, kAllReduce);
  const std::vector<NcclCommSteps> all = s.Steps();
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].steps.size(), 2u);
  EXPECT_EQ(all[0].steps[0].straggler, -1);
  EXPECT_EQ(all[0].steps[0].ranks[0].compute_ns, 99 * kMs);
  EXPECT_EQ(all[0].steps[0].ranks[0].waiting_ns, 0u);
}

TEST(NcclStepsTest, NoCallSiteRepeatedNoStepsAndOffUnlessEnabled) {
  NcclSteps s;
  s.Enable();
  uint64_t seq[2] = {0, 0};
  for (int rank : {0, 1}) Collective(s, rank, &seq[rank], 1, 2, kAllReduce);
  for (int rank : {0, 1}) Collective(s, rank, &seq[rank], 3, 4, kBroadcast);
  ASSERT_EQ(s.Steps().size(), 1u);
  EXPECT_TRUE(s.Steps()[0].steps.empty());
  NcclSteps off;
  for (uint64_t k = 0; k < 3; k++)
    for (int rank : {0, 1}) Collective(off, rank, &seq[rank], 100 * k, 100 * k + 1, kAllReduce);
  EXPECT_TRUE(off.Steps().empty());
}

}  // namespace
}  // namespace gpuflame::profiler
