// Leaks and growth (profiler/forensics/growth.h): in-use series at interval
// boundaries, halving when full, the thresholds, retired ids, and the
// summary.json and terminal reports, to the byte.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "profiler/forensics/growth.h"
#include "profiler/forensics/growth_report.h"

namespace gpuflame::profiler {
namespace {

constexpr int64_t MiB = 1 << 20;
constexpr uint64_t kPeriod = 1000;

class GrowthTest : public ::testing::Test {
 protected:
  // A stack of |pid| in |domain| whose frames are |names| (root first).
  StackId Stack(pid_t pid, uint8_t domain, std::vector<std::string> names) {
    std::vector<FrameId> ids;
    for (std::string& n : names) {
      symbolizer::Frame f;
      f.kind = symbolizer::FrameKind::kPython;
      f.name = n;
      ids.push_back(frames_.Intern(f));
    }
    const std::string raw = "stack" + std::to_string(stacks_.size());
    const StackId id = stacks_.Insert(raw, StackInfo{pid, domain, ids});
    if (counters_.size() <= id) counters_.resize(id + 1);
    return id;
  }
  void Set(StackId id, int64_t bytes) { counters_[id].inuse_bytes = bytes; }
  // |bytes| in use after |allocations| allocations in all.
  void Set(StackId id, int64_t bytes, int64_t allocations) {
    counters_[id].inuse_bytes = bytes;
    counters_[id].alloc_objects = allocations;
  }
  // The boundary at |i| periods from the start.
  void Boundary(GrowthTracker& g, uint64_t i) { g.TakeBoundary(i * kPeriod, counters_, stacks_); }

  FrameTable frames_;
  StackTable stacks_;
  std::vector<StackCounters> counters_;
};

TEST_F(GrowthTest, ALeakIsReportedAndAStackThatGrewOnceOrChurnsIsNot) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  const StackId leak = Stack(7, GF_DOMAIN_TORCH, {"<module>", "Cache > leak"});
  const StackId once = Stack(7, GF_DOMAIN_TORCH, {"<module>", "Model > load"});
  const StackId churn = Stack(7, GF_DOMAIN_TORCH, {"<module>", "Trainer > step"});
  // Boundary 0: nothing yet. Then the leak gains 2 MiB per interval except
  // the fourth; "once" takes 8 MiB at boundary 2 and keeps it; "churn"
  // holds 4 MiB at every other boundary.
  Boundary(g, 0);
  const int64_t leak_at[] = {0, 2, 4, 6, 6, 8, 10, 12};
  for (uint64_t i = 1; i < 8; i++) {
    Set(leak, leak_at[i] * MiB);
    Set(once, i >= 2 ? 8 * MiB : 0);
    Set(churn, i % 2 ? 4 * MiB : 0);
    Boundary(g, i);
  }
  EXPECT_EQ(g.intervals(), 7u);
  const std::vector<GrowingStack> growing = g.Growing();
  ASSERT_EQ(growing.size(), 1u);
  const GrowingStack& s = growing[0];
  EXPECT_EQ(s.stack, leak);
  EXPECT_EQ(s.pid, 7);
  EXPECT_EQ(s.domain, GF_DOMAIN_TORCH);
  EXPECT_EQ(s.growth_bytes, 12 * MiB);
  EXPECT_EQ(s.intervals_grown, 6u);  // from 0 at boundary 1 to 12 MiB at 7, flat once
  EXPECT_EQ(s.intervals, 7u);
  EXPECT_EQ(s.first_inuse, 0);
  EXPECT_EQ(s.last_inuse, 12 * MiB);
  EXPECT_EQ(s.since_ns, 1 * kPeriod);
  EXPECT_EQ(s.process_inuse, (12 + 8 + 4) * MiB);
  (void)once;
  (void)churn;
}

TEST_F(GrowthTest, AStackHeldFromTheFirstBoundaryGrowsFromItsValueThere) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  const StackId s = Stack(9, GF_DOMAIN_GPU, {"main", "grow"});
  for (uint64_t i = 0; i < 5; i++) {
    Set(s, static_cast<int64_t>(10 + i) * MiB);
    Boundary(g, i);
  }
  const std::vector<GrowingStack> growing = g.Growing();
  ASSERT_EQ(growing.size(), 1u);
  EXPECT_EQ(growing[0].first_inuse, 10 * MiB);
  EXPECT_EQ(growing[0].last_inuse, 14 * MiB);
  EXPECT_EQ(growing[0].growth_bytes, 4 * MiB);
  EXPECT_EQ(growing[0].intervals_grown, 4u);
  EXPECT_EQ(growing[0].intervals, 4u);
  EXPECT_EQ(growing[0].since_ns, 0u);
}

TEST_F(GrowthTest, ThresholdsMajorityIntervalsAndMaterialGrowth) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  // Grows in 4 of 6 intervals (2/3: enough) by 4 MiB.
  const StackId majority = Stack(1, GF_DOMAIN_GPU, {"a"});
  // Grows in 3 of 6 (not a clear majority) by 6 MiB.
  const StackId half = Stack(1, GF_DOMAIN_GPU, {"b"});
  // Grows in every interval by 100 KiB in all: under 1 MiB, and under 5%
  // of its process (pid 1 holds far more).
  const StackId small = Stack(1, GF_DOMAIN_GPU, {"c"});
  // The same 100 KiB in a process holding 1.1 MiB: over 5% of it.
  const StackId small_process = Stack(2, GF_DOMAIN_GPU, {"d"});
  const StackId rest = Stack(2, GF_DOMAIN_GPU, {"e"});
  const int64_t majority_at[] = {1, 2, 2, 3, 4, 4, 5};
  const int64_t half_at[] = {1, 3, 3, 5, 5, 7, 7};
  for (uint64_t i = 0; i < 7; i++) {
    Set(majority, majority_at[i] * MiB);
    Set(half, half_at[i] * MiB);
    Set(small, static_cast<int64_t>(1 + i) * 17 * 1024);
    Set(small_process, static_cast<int64_t>(1 + i) * 17 * 1024);
    Set(rest, MiB);
    Boundary(g, i);
  }
  const std::vector<GrowingStack> growing = g.Growing();
  ASSERT_EQ(growing.size(), 2u);
  EXPECT_EQ(growing[0].stack, majority);
  EXPECT_EQ(growing[0].intervals_grown, 4u);
  EXPECT_EQ(growing[0].intervals, 6u);
  EXPECT_EQ(growing[0].growth_bytes, 4 * MiB);
  EXPECT_EQ(growing[1].stack, small_process);
  EXPECT_EQ(growing[1].growth_bytes, 6 * 17 * 1024);
  EXPECT_EQ(growing[1].process_inuse, MiB + 7 * 17 * 1024);
  (void)half;
  (void)small;
}

TEST_F(GrowthTest, TooFewIntervalsGrownIsNotSustained) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  const StackId s = Stack(1, GF_DOMAIN_GPU, {"a"});
  Boundary(g, 0);
  Set(s, 50 * MiB);
  Boundary(g, 1);
  Set(s, 100 * MiB);
  Boundary(g, 2);  // 2 of 2 intervals: not yet 3
  EXPECT_TRUE(g.Growing().empty());
  Set(s, 150 * MiB);
  Boundary(g, 3);
  ASSERT_EQ(g.Growing().size(), 1u);
  EXPECT_EQ(g.Growing()[0].growth_bytes, 150 * MiB);
}

TEST_F(GrowthTest, TickTakesABoundaryOncePerPeriod) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  EXPECT_TRUE(g.Tick(5, counters_, stacks_));  // the first at once
  EXPECT_FALSE(g.Tick(5 + kPeriod - 1, counters_, stacks_));
  EXPECT_TRUE(g.Tick(5 + kPeriod, counters_, stacks_));
  EXPECT_FALSE(g.Tick(5 + 2 * kPeriod - 1, counters_, stacks_));
  EXPECT_EQ(g.boundaries(), 2u);
  EXPECT_EQ(g.boundary_times(), (std::vector<uint64_t>{5, 5 + kPeriod}));
}

TEST_F(GrowthTest, HalvingKeepsEveryOtherBoundaryAndDoublesThePeriod) {
  GrowthTracker g(GrowthOptions{kPeriod, 8, {}});
  const StackId early = Stack(1, GF_DOMAIN_TORCH, {"early"});  // from boundary 0: 1 MiB more at each
  const StackId odd = Stack(1, GF_DOMAIN_TORCH, {"odd"});      // from boundary 3: 2 MiB more at each
  for (uint64_t i = 0; i < 8; i++) {
    Set(early, static_cast<int64_t>(1 + i) * MiB);
    Set(odd, i >= 3 ? static_cast<int64_t>(i - 2) * 2 * MiB : 0);
    EXPECT_TRUE(g.Tick(i * kPeriod, counters_, stacks_));
  }
  EXPECT_EQ(g.boundaries(), 8u);
  // The ninth boundary: 0, 2, 4, 6 stay (as 0..3), then 8 as 4.
  EXPECT_FALSE(g.Tick(8 * kPeriod - 1, counters_, stacks_));
  Set(early, 9 * MiB);
  Set(odd, 12 * MiB);
  EXPECT_TRUE(g.Tick(8 * kPeriod, counters_, stacks_));
  EXPECT_EQ(g.boundary_times(), (std::vector<uint64_t>{0, 2 * kPeriod, 4 * kPeriod, 6 * kPeriod, 8 * kPeriod}));
  EXPECT_EQ(g.period_ns(), 2 * kPeriod);
  EXPECT_FALSE(g.Tick(10 * kPeriod - 1, counters_, stacks_));  // the doubled period
  const std::vector<GrowingStack> growing = g.Growing();
  ASSERT_EQ(growing.size(), 2u);
  // "odd" started at boundary 3, now at the kept boundary 4 (index 2): zero
  // at boundary 2 (index 1), then 4, 8, 12 MiB.
  EXPECT_EQ(growing[0].stack, odd);
  EXPECT_EQ(growing[0].first_inuse, 0);
  EXPECT_EQ(growing[0].last_inuse, 12 * MiB);
  EXPECT_EQ(growing[0].intervals, 3u);
  EXPECT_EQ(growing[0].intervals_grown, 3u);
  EXPECT_EQ(growing[0].since_ns, 4 * kPeriod);
  // "early": 1, 3, 5, 7, 9 MiB at the kept boundaries.
  EXPECT_EQ(growing[1].stack, early);
  EXPECT_EQ(growing[1].first_inuse, MiB);
  EXPECT_EQ(growing[1].growth_bytes, 8 * MiB);
  EXPECT_EQ(growing[1].intervals, 4u);
  EXPECT_EQ(growing[1].intervals_grown, 4u);
}

TEST_F(GrowthTest, HalvingDropsTheSeriesStartingAtTheLastOddBoundaryToItsNextValue) {
  GrowthTracker g(GrowthOptions{kPeriod, 6, {}});
  const StackId late = Stack(1, GF_DOMAIN_GPU, {"late"});
  for (uint64_t i = 0; i < 5; i++) Boundary(g, i);
  Set(late, 5 * MiB);
  Boundary(g, 5);  // its series starts at the last (odd) boundary, which halving drops
  Set(late, 6 * MiB);
  Boundary(g, 6);  // kept: 0, 2, 4, then 6
  EXPECT_EQ(g.boundary_times(), (std::vector<uint64_t>{0, 2 * kPeriod, 4 * kPeriod, 6 * kPeriod}));
  Set(late, 7 * MiB);
  Boundary(g, 7);
  Set(late, 8 * MiB);
  Boundary(g, 8);
  const std::vector<GrowingStack> growing = g.Growing();
  ASSERT_EQ(growing.size(), 1u);
  EXPECT_EQ(growing[0].first_inuse, 0);  // at boundary 4, kept
  EXPECT_EQ(growing[0].last_inuse, 8 * MiB);
  EXPECT_EQ(growing[0].intervals, 3u);
  EXPECT_EQ(growing[0].intervals_grown, 3u);
  EXPECT_EQ(growing[0].since_ns, 6 * kPeriod);
}

TEST_F(GrowthTest, AStackBackAtZeroStartsAfresh) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  const StackId s = Stack(1, GF_DOMAIN_GPU, {"a"});
  const int64_t at[] = {1, 2, 3, 0, 1, 2};
  for (uint64_t i = 0; i < 6; i++) {
    Set(s, at[i] * MiB);
    Boundary(g, i);
  }
  EXPECT_TRUE(g.Growing().empty());  // from zero at boundary 3: 2 intervals
  Set(s, 3 * MiB);
  Boundary(g, 6);
  ASSERT_EQ(g.Growing().size(), 1u);
  EXPECT_EQ(g.Growing()[0].first_inuse, 0);
  EXPECT_EQ(g.Growing()[0].growth_bytes, 3 * MiB);
  EXPECT_EQ(g.Growing()[0].since_ns, 4 * kPeriod);
}

TEST_F(GrowthTest, ARetiredIdReusedByAnotherProcessStartsAfresh) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  const StackId s = Stack(1, GF_DOMAIN_GPU, {"a"});
  for (uint64_t i = 0; i < 4; i++) {
    Set(s, static_cast<int64_t>(1 + i) * MiB);
    Boundary(g, i);
  }
  ASSERT_EQ(g.Growing().size(), 1u);
  // Retired and handed to a stack of pid 2 without ForgetStacks: its
  // series restarts rather than carrying pid 1's.
  stacks_.Retire({s});
  const StackId reused = Stack(2, GF_DOMAIN_GPU, {"b"});
  ASSERT_EQ(reused, s);
  Set(reused, 50 * MiB);
  Boundary(g, 4);
  EXPECT_TRUE(g.Growing().empty());
  // ForgetStacks drops a series at once.
  for (uint64_t i = 5; i < 9; i++) {
    Set(reused, static_cast<int64_t>(50 + i) * MiB);
    Boundary(g, i);
  }
  ASSERT_EQ(g.Growing().size(), 1u);
  EXPECT_EQ(g.Growing()[0].pid, 2);
  EXPECT_EQ(g.Growing()[0].first_inuse, 0);
  g.ForgetStacks(std::vector<StackId>{reused});
  EXPECT_TRUE(g.Growing().empty());
}

// A leak of 2 MiB per interval to 12 MiB at boundary 6, its process's last
// allocation; then freed at a later boundary, or never, to the last, 9.
TEST_F(GrowthTest, AnEndedProcessIsJudgedBeforeItsTeardown) {
  const StackId leak = Stack(7, GF_DOMAIN_TORCH, {"<module>", "Cache > leak"});
  auto run = [&](uint64_t teardown, bool alloc_at_teardown) {
    GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
    Boundary(g, 0);
    for (uint64_t i = 1; i < 10; i++) {
      const int64_t n = static_cast<int64_t>(std::min<uint64_t>(i, 6));
      // The teardown frees it all; an allocation in its interval is the last.
      Set(leak, i >= teardown ? 0 : 2 * n * MiB, n + (alloc_at_teardown && i >= teardown ? 1 : 0));
      Boundary(g, i);
    }
    return g;
  };
  const auto ended = [](pid_t pid) { return pid == 7; };
  // Freed two intervals after its last allocation (boundary 6): judged at
  // 7, the latest boundary where it held most.
  GrowthTracker g = run(8, false);
  EXPECT_TRUE(g.Growing().empty()) << "running, it gave its memory back";
  std::vector<GrowingStack> growing = g.Growing(ended);
  ASSERT_EQ(growing.size(), 1u);
  EXPECT_EQ(growing[0].stack, leak);
  EXPECT_EQ(growing[0].growth_bytes, 12 * MiB);
  EXPECT_EQ(growing[0].last_inuse, 12 * MiB);
  EXPECT_EQ(growing[0].intervals, 7u);
  EXPECT_EQ(growing[0].intervals_grown, 6u);
  EXPECT_EQ(growing[0].until_ns, 7 * kPeriod);
  EXPECT_EQ(growing[0].process_inuse, 12 * MiB);
  EXPECT_TRUE(growing[0].before_teardown);
  EXPECT_EQ(growing[0].final_inuse, 0);
  // Freed in the interval of one last allocation: judged at the boundary
  // before it (6), where it held most.
  growing = run(7, true).Growing(ended);
  ASSERT_EQ(growing.size(), 1u);
  EXPECT_EQ(growing[0].until_ns, 6 * kPeriod);
  EXPECT_EQ(growing[0].last_inuse, 12 * MiB);
  // Never freed (its process exited holding it): judged at the last boundary.
  growing = run(100, false).Growing(ended);
  ASSERT_EQ(growing.size(), 1u);
  EXPECT_EQ(growing[0].until_ns, 9 * kPeriod);
  EXPECT_FALSE(growing[0].before_teardown);
  EXPECT_EQ(growing[0].intervals, 9u);
  EXPECT_EQ(growing[0].intervals_grown, 6u);
  EXPECT_EQ(growing[0].final_inuse, 12 * MiB);
}

TEST_F(GrowthTest, WhatAProcessGaveBackWhileItStillAllocatedIsNoTeardown) {
  GrowthTracker g(GrowthOptions{kPeriod, 64, {}});
  const StackId cache = Stack(7, GF_DOMAIN_GPU, {"<module>", "warm_cache"});
  const StackId work = Stack(7, GF_DOMAIN_GPU, {"<module>", "work"});
  // The cache grows to 8 MiB by boundary 4 and is freed at 5; work allocates
  // (1 MiB, freed) to boundary 8; the process then exits.
  for (uint64_t i = 0; i < 10; i++) {
    const int64_t c = static_cast<int64_t>(std::min<uint64_t>(i, 4));
    Set(cache, i >= 5 ? 0 : 2 * c * MiB, c);
    Set(work, MiB, static_cast<int64_t>(std::min<uint64_t>(i, 8)));
    Boundary(g, i);
  }
  EXPECT_TRUE(g.Growing([](pid_t) { return true; }).empty());
}

TEST_F(GrowthTest, ProcessSeriesHalveWithTheBoundaries) {
  GrowthTracker g(GrowthOptions{kPeriod, 8, {}});
  const StackId leak = Stack(3, GF_DOMAIN_TORCH, {"leak"});
  // 1 MiB more per boundary to boundary 10 (its last allocation), freed at 12.
  for (uint64_t i = 0; i < 14; i++) {
    const int64_t n = static_cast<int64_t>(std::min<uint64_t>(i, 10));
    Set(leak, i >= 12 ? 0 : n * MiB, n);
    Boundary(g, i);
  }
  // Kept: 0, 4, 8, 10, then 12 and 13 (halved twice).
  EXPECT_EQ(g.boundary_times(),
            (std::vector<uint64_t>{0, 4 * kPeriod, 8 * kPeriod, 10 * kPeriod, 12 * kPeriod, 13 * kPeriod}));
  const std::vector<GrowingStack> growing = g.Growing([](pid_t) { return true; });
  ASSERT_EQ(growing.size(), 1u);
  EXPECT_EQ(growing[0].until_ns, 10 * kPeriod);
  EXPECT_EQ(growing[0].last_inuse, 10 * MiB);
  EXPECT_TRUE(growing[0].before_teardown);
}

TEST_F(GrowthTest, SummaryJsonAndTerminalLines) {
  GrowthTracker g(GrowthOptions{250'000'000, 64, {}});
  const StackId leak = Stack(42, GF_DOMAIN_TORCH, {"<module>", "Cache; leak", "empty"});
  const StackId dev = Stack(42, GF_DOMAIN_GPU, {"<module>", "Cache; leak", "cudaMalloc"});
  for (uint64_t i = 0; i < 5; i++) {
    Set(leak, static_cast<int64_t>(i) * 2 * MiB);
    Set(dev, static_cast<int64_t>(i) * 2 * MiB);
    g.TakeBoundary(i * 250'000'000, counters_, stacks_);
  }
  const std::vector<GrowingStack> growing = g.Growing();
  ASSERT_EQ(growing.size(), 2u);
  const auto j = nlohmann::json::parse(GrowthJson(g, growing, StackSource{stacks_, frames_}, {{42, "python3"}}));
  EXPECT_EQ(j["intervals"], 4);
  EXPECT_EQ(j["interval_seconds"], 0.25);
  EXPECT_EQ(j["thresholds"]["min_bytes"], MiB);
  ASSERT_EQ(j["processes"].size(), 1u);
  const auto& p = j["processes"][0];
  EXPECT_EQ(p["pid"], 42);
  EXPECT_EQ(p["process"], "python3");
  ASSERT_EQ(p["torch_memory"].size(), 1u);
  ASSERT_EQ(p["gpu_memory"].size(), 1u);
  const auto& t = p["torch_memory"][0];
  EXPECT_EQ(t["stack"], "<module>;Cache  leak;empty");  // ';' in a name as the .folded files write it
  EXPECT_EQ(t["growth_bytes"], 8 * MiB);
  EXPECT_EQ(t["intervals_grown"], 4);
  EXPECT_EQ(t["intervals"], 4);
  EXPECT_EQ(t["first_inuse_bytes"], 0);
  EXPECT_EQ(t["last_inuse_bytes"], 8 * MiB);
  EXPECT_EQ(t["since_seconds"], 0.25);
  EXPECT_EQ(t["until_seconds"], 1.0);
  EXPECT_EQ(t["before_teardown"], false);
  EXPECT_EQ(t["final_inuse_bytes"], 8 * MiB);
  EXPECT_EQ(p["gpu_memory"][0]["stack"], "<module>;Cache  leak;cudaMalloc");

  const std::vector<std::string> lines = GrowthLines(g, growing, StackSource{stacks_, frames_});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "growing (in use, 4 intervals of 250.0 ms):");
  EXPECT_NE(lines[1].find("pid 42 "), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find(" +8.00 MiB in 4/4 intervals (0 B → 8.00 MiB since 0.25 s) under `"), std::string::npos)
      << lines[1];
  EXPECT_TRUE(nlohmann::json::parse(GrowthJson(g, {}, StackSource{stacks_, frames_}, {}))["processes"].empty());

  // Judged before its process's teardown: said, with what it was left.
  GrowingStack torn = growing[0];
  torn.before_teardown = true;
  torn.final_inuse = 0;
  const auto tj = nlohmann::json::parse(GrowthJson(g, {torn}, StackSource{stacks_, frames_}, {}));
  EXPECT_EQ(tj["processes"][0][GrowthLevelName(torn.domain)][0]["before_teardown"], true);
  EXPECT_EQ(tj["processes"][0][GrowthLevelName(torn.domain)][0]["final_inuse_bytes"], 0);
  EXPECT_NE(GrowthLines(g, {torn}, StackSource{stacks_, frames_})[1].find(
                "(0 B → 8.00 MiB since 0.25 s, until its teardown freed it to 0 B) under `"),
            std::string::npos);
  EXPECT_EQ(
      GrowthLines(g, {}, StackSource{stacks_, frames_}),
      std::vector<std::string>{"growing: no stack grew in most of its intervals (in use, 4 intervals of 250.0 ms)"});
}

}  // namespace
}  // namespace gpuflame::profiler
