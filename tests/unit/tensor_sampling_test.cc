// The in-process tensor sampler and its block set: the estimate is unbiased
// (checked against many seeds, not one lucky one), big allocations are
// exact, and the set never loses or invents a block.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <set>

#include "inprocess/block_set.h"
#include "inprocess/byte_sampler.h"
#include "inprocess/hook_budget.h"

namespace gpuflame::inprocess {
namespace {

TEST(ByteSamplerTest, IntervalZeroTakesEveryAllocationAsItself) {
  ByteSampler s(0, 1);
  for (uint64_t size : {1ull, 512ull, 1ull << 30}) EXPECT_EQ(s.Sample(size), size);
  s.SetInterval(4 << 20);  // a budget's step does not make an exact run sampled
  EXPECT_EQ(s.Sample(1), 1u);
}

TEST(ByteSamplerTest, AllocationsOfAnIntervalOrMoreAreExact) {
  ByteSampler s(4 << 20, 7);
  for (int i = 0; i < 1000; i++) EXPECT_EQ(s.Sample((4 << 20) + i), uint64_t{4 << 20} + i);
}

TEST(ByteSamplerTest, SmallAllocationsSumToAnUnbiasedEstimate) {
  // 20 seeds x 200 k allocations of 4 KiB-1 MiB at a 4 MiB interval: each
  // run's estimate is within 5 % of the truth, the runs' mean within 1 %,
  // and only a small share of allocations is taken.
  constexpr uint64_t kInterval = 4 << 20;
  double mean_ratio = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    ByteSampler s(kInterval, seed);
    std::mt19937_64 sizes(seed * 977);
    uint64_t truth = 0, estimate = 0, taken = 0;
    for (int i = 0; i < 200'000; i++) {
      const uint64_t size = 4096 + sizes() % (1 << 20);
      truth += size;
      const uint64_t w = s.Sample(size);
      estimate += w;
      taken += w != 0;
      if (w) {
        EXPECT_EQ(w % kInterval, 0u);
      }
    }
    const double ratio = static_cast<double>(estimate) / static_cast<double>(truth);
    EXPECT_NEAR(ratio, 1.0, 0.05) << "seed " << seed;
    EXPECT_LT(taken, 200'000u / 6) << "seed " << seed;
    mean_ratio += ratio / 20;
  }
  EXPECT_NEAR(mean_ratio, 1.0, 0.01);
}

TEST(ByteSamplerTest, ACoarserIntervalTakesFewerAndStaysUnbiased) {
  // The hook's budget doubled the interval twice (hook_budget.h): a quarter
  // of the draws, each standing for 16 MiB, and the sum still the truth's.
  constexpr uint64_t kInterval = 4 << 20;
  double mean_ratio = 0;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    ByteSampler s(kInterval, seed);
    std::mt19937_64 sizes(seed * 31);
    uint64_t truth = 0, estimate = 0, taken_before = 0, taken_after = 0;
    for (int i = 0; i < 400'000; i++) {
      if (i == 200'000) s.SetInterval(4 * kInterval);
      const uint64_t size = 4096 + sizes() % (1 << 20);
      truth += size;
      const uint64_t w = s.Sample(size);
      estimate += w;
      (i < 200'000 ? taken_before : taken_after) += w != 0;
      if (w && i >= 200'000) {
        EXPECT_EQ(w % (4 * kInterval), 0u);
      }
    }
    EXPECT_EQ(s.interval(), 4 * kInterval);
    EXPECT_NEAR(static_cast<double>(taken_after) / static_cast<double>(taken_before), 0.25, 0.05) << "seed " << seed;
    mean_ratio += static_cast<double>(estimate) / static_cast<double>(truth) / 20;
  }
  EXPECT_NEAR(mean_ratio, 1.0, 0.01);
  // Allocations of the new interval or more are exact; between, sampled.
  ByteSampler s(kInterval, 5);
  s.SetInterval(4 * kInterval);
  EXPECT_EQ(s.Sample(16 << 20), uint64_t{16} << 20);
  s.SetInterval(kInterval);
  EXPECT_EQ(s.interval(), kInterval);
  EXPECT_EQ(s.Sample(4 << 20), uint64_t{4} << 20);
}

// The hook's quick path asks SkipIfNotTaken first and Sample only when it
// declines: the same stream of allocations is taken exactly as by Sample
// alone, each standing for the same bytes.
TEST(ByteSamplerTest, SkippingFirstTakesWhatSampleAloneTakes) {
  for (uint64_t interval : {0ull, 4096ull, 1ull << 20}) {
    ByteSampler alone(interval, 42), skipping(interval, 42);
    uint64_t rng = 7, taken = 0;
    for (int i = 0; i < 200000; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t size = 1 + (rng >> 33) % (3 << 20);  // up to 3 MiB: some past the interval
      const uint64_t a = alone.Sample(size);
      const uint64_t b = skipping.SkipIfNotTaken(size) ? 0 : skipping.Sample(size);
      ASSERT_EQ(a, b) << "interval " << interval << ", allocation " << i;
      taken += a != 0;
    }
    EXPECT_GT(taken, 0u);
  }
}

TEST(HookBudgetTest, CoarsensOnceAWindowWhileOverAndComesBackSlowly) {
  constexpr uint64_t kS = 1'000'000'000, kTick = 100'000'000;
  HookBudget b(0.005);  // 0.5% of the process's CPU
  uint64_t now = 1000 * kS, hook = 0, cpu = 0;
  auto run = [&](double seconds, double share) {
    for (int i = 0; i < static_cast<int>(seconds * 10); i++) {
      now += kTick;
      cpu += kTick;  // one busy core
      hook += static_cast<uint64_t>(share * kTick);
      b.Tick(now, hook, cpu);
    }
  };
  run(9.5, 0.02);
  EXPECT_EQ(b.scale(), 1u) << "no step before a whole window";
  run(1, 0.02);
  EXPECT_EQ(b.scale(), 2u);
  EXPECT_NEAR(b.share(), 0.02, 0.001);
  run(9.5, 0.02);
  EXPECT_EQ(b.scale(), 2u) << "at most one step in 10 s";
  run(1, 0.02);
  EXPECT_EQ(b.scale(), 4u);
  run(600, 0.02);
  EXPECT_EQ(b.scale(), HookBudget::kMaxScale) << "bounded";
  // Within budget but above a quarter of it: it stays.
  run(120, 0.003);
  EXPECT_EQ(b.scale(), HookBudget::kMaxScale);
  // Well under: a step back after 30 s of a window's share under a quarter
  // (the window's share gets there some 7 s after the change), the next
  // 30 s later.
  run(40, 0.0005);
  EXPECT_EQ(b.scale(), HookBudget::kMaxScale / 2);
  run(20, 0.0005);
  EXPECT_EQ(b.scale(), HookBudget::kMaxScale / 2);
  run(15, 0.0005);
  EXPECT_EQ(b.scale(), HookBudget::kMaxScale / 4);
  // Exact for a while (every allocation taken, so far over budget): paused,
  // and the window after it does not reach back into it.
  const uint32_t before = b.scale();
  b.Pause();
  hook += 30 * kS;  // the exact period's walks
  now += 60 * kS;
  cpu += 60 * kS;
  run(12, 0.003);
  EXPECT_EQ(b.scale(), before);
  // Idle (no CPU): no share, no step.
  const uint32_t idle = b.scale();
  for (int i = 0; i < 1000; i++) b.Tick(now += kTick, hook, cpu);
  EXPECT_EQ(b.scale(), idle);
  // A budget of 0 never acts.
  HookBudget off(0);
  for (int i = 0; i < 1000; i++) EXPECT_EQ(off.Tick(now += kTick, (i + 1) * kTick, (i + 1) * kTick), 1u);
}

TEST(BlockSetTest, MatchesAReferenceSetUnderChurn) {
  // Clustered addresses (as the caching allocator's), many reuses: every
  // answer equals std::set's, so erasure never strands an entry.
  auto set = std::make_unique<BlockSet<1024>>();
  std::set<uint64_t> ref;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200'000; i++) {
    const uint64_t addr = 0x7f0000000000ull + (rng() % 1500) * 512;
    if (rng() % 2) {
      const bool fits = ref.size() < 768 || ref.contains(addr);
      ASSERT_EQ(set->Insert(addr), fits) << i;
      if (fits) ref.insert(addr);
    } else {
      ASSERT_EQ(set->Erase(addr), ref.erase(addr) == 1) << i;
    }
    ASSERT_EQ(set->size(), ref.size());
    if (i % 1000 == 0) {
      for (uint64_t a : ref) ASSERT_TRUE(set->MayContain(a)) << i << ": the filter ruled out an entry";
    }
  }
  for (uint64_t addr : ref) EXPECT_TRUE(set->Erase(addr));
  EXPECT_EQ(set->size(), 0u);
}

TEST(BlockSetTest, GrowsAsItFillsAndLosesNothingOnTheWay) {
  // From 64 slots to 4096 and full, with erasures between: every answer
  // equals std::set's through each doubling, and Clear starts over small.
  auto set = std::make_unique<BlockSet<4096, 64>>();
  std::set<uint64_t> ref;
  std::mt19937_64 rng(11);
  size_t last_capacity = set->capacity();
  int doublings = 0;
  for (int i = 0; i < 40'000; i++) {
    const uint64_t addr = 0x7f0000000000ull + (rng() % 6000) * 512;
    if (rng() % 4 != 0) {
      const bool fits = ref.size() < 3072 || ref.contains(addr);
      ASSERT_EQ(set->Insert(addr), fits) << i;
      if (fits) ref.insert(addr);
    } else {
      ASSERT_EQ(set->Erase(addr), ref.erase(addr) == 1) << i;
    }
    ASSERT_EQ(set->size(), ref.size());
    ASSERT_GE(set->capacity(), set->size() * 4 / 3);
    if (set->capacity() != last_capacity) {
      doublings++;
      for (uint64_t a : ref) ASSERT_FALSE(set->Insert(a) && set->size() != ref.size()) << "lost in a doubling";
      last_capacity = set->capacity();
    }
  }
  EXPECT_EQ(doublings, 6);  // 64 -> 4096
  EXPECT_EQ(set->capacity(), 4096u);
  for (uint64_t addr : ref) EXPECT_TRUE(set->Erase(addr));
  EXPECT_EQ(set->size(), 0u);
  set->Clear();
  EXPECT_EQ(set->capacity(), 64u);
}

TEST(BlockSetTest, ItsFilterRulesOutMostBlocksNotThereAndNeverOneThatIs) {
  // A sampled run's few sent blocks among many freed: the filter answers
  // "maybe" for every entry, and "no" for most other addresses, also after
  // churn (a bit is cleared when the last entry hashing to it goes).
  auto set = std::make_unique<BlockSet<1024>>();
  std::set<uint64_t> ref;
  std::mt19937_64 rng(5);
  auto absent_maybe_share = [&] {
    int maybe = 0, asked = 0;
    for (int i = 0; i < 20'000; i++) {
      const uint64_t addr = 0x7e0000000000ull + (rng() % (1u << 24)) * 512;
      if (ref.contains(addr)) continue;
      asked++;
      maybe += set->MayContain(addr);
    }
    return static_cast<double>(maybe) / asked;
  };
  for (int round = 0; round < 50; round++) {
    // 30 entries, then all but a few go, as a step's sent blocks do.
    while (ref.size() < 30) {
      const uint64_t addr = 0x7f0000000000ull + (rng() % 4000) * 512;
      ASSERT_TRUE(set->Insert(addr));
      ref.insert(addr);
    }
    for (uint64_t addr : ref) ASSERT_TRUE(set->MayContain(addr)) << round;
    EXPECT_LT(absent_maybe_share(), 0.15) << round << ": 30 entries set about 6.5% of the bits";
    EXPECT_GE(set->FilterBitsSet(), 20u) << round << ": 30 entries, few sharing a bit";
    EXPECT_LE(set->FilterBitsSet(), 30u) << round;
    while (ref.size() > 3) {
      const uint64_t addr = *ref.begin();
      ASSERT_TRUE(set->Erase(addr));
      ref.erase(addr);
    }
  }
  for (uint64_t addr : ref) ASSERT_TRUE(set->Erase(addr));
  EXPECT_EQ(absent_maybe_share(), 0.0) << "every bit clear once the set is empty";
  EXPECT_EQ(set->FilterBitsSet(), 0u);
}

TEST(BlockSetTest, RefusesPastThreeQuartersAndClears) {
  auto set = std::make_unique<BlockSet<64>>();
  for (uint64_t a = 1; a <= 48; a++) EXPECT_TRUE(set->Insert(a * 4096));
  EXPECT_FALSE(set->Insert(49 * 4096));
  EXPECT_TRUE(set->Insert(48 * 4096)) << "already there";
  EXPECT_FALSE(set->Insert(0));
  set->Clear();
  EXPECT_EQ(set->size(), 0u);
  EXPECT_FALSE(set->Erase(4096));
  EXPECT_TRUE(set->Insert(49 * 4096));
  // The filter starts over with the table: what comes back after a Clear is
  // found again, what went stays gone.
  EXPECT_TRUE(set->Insert(4096));
  EXPECT_TRUE(set->Erase(49 * 4096));
  EXPECT_TRUE(set->Erase(4096));
  EXPECT_FALSE(set->Erase(4096));
  EXPECT_EQ(set->size(), 0u);
}

}  // namespace
}  // namespace gpuflame::inprocess
