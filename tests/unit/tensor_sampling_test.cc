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

namespace gpuflame::inprocess {
namespace {

TEST(ByteSamplerTest, IntervalZeroTakesEveryAllocationAsItself) {
  ByteSampler s(0, 1);
  for (uint64_t size : {1ull, 512ull, 1ull << 30}) EXPECT_EQ(s.Sample(size), size);
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
  }
  for (uint64_t addr : ref) EXPECT_TRUE(set->Erase(addr));
  EXPECT_EQ(set->size(), 0u);
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
}

}  // namespace
}  // namespace gpuflame::inprocess
