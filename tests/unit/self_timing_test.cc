#include "inprocess/self_timing.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace gpuflame::inprocess {
namespace {

// How many of |n| IDs from |first|, |stride| apart, are timed.
uint64_t TimedOf(uint64_t first, uint64_t stride, uint64_t n) {
  uint64_t timed = 0;
  for (uint64_t i = 0; i < n; i++) timed += TimedById(first + i * stride);
  return timed;
}

// CUPTI's correlation IDs count up, and calls take them in patterns: a
// runtime launch and the driver launch inside it take two in a row, so
// each kind alone is a progression of stride 2 (or more, with copies
// between). Each must be timed one in kTimedOneIn, or the scaled estimate
// would charge one kind's cost for the other's.
TEST(SelfTimingTest, TimedByIdPicksOneInSixtyFourOfEveryProgression) {
  constexpr uint64_t kN = 1 << 20;
  const double expected = static_cast<double>(kN) / kTimedOneIn;
  for (uint64_t stride : {1, 2, 3, 4, 8, 64, 1000}) {
    for (uint64_t first : {0ull, 1ull, 12345ull}) {
      const double timed = static_cast<double>(TimedOf(first, stride, kN));
      EXPECT_NEAR(timed / expected, 1.0, 0.02) << "stride " << stride << ", first ID " << first;
    }
  }
}

// The timed ones are spread out: no run of 1,000 consecutive IDs goes untimed
// (a burst of calls is timed within it, not only between bursts).
TEST(SelfTimingTest, TimedByIdLeavesNoLongRunUntimed) {
  uint64_t run = 0, longest = 0;
  for (uint64_t id = 0; id < (1 << 22); id++) {
    run = TimedById(id) ? 0 : run + 1;
    if (run > longest) longest = run;
  }
  EXPECT_LT(longest, 1000u);
}

// Ticks turn into ns at the counter's rate against the clock: an interval
// read in ticks reads as the clock's, within what a sleep's wake-up (and a
// preemption between two paired reads) blurs over 100 ms.
TEST(SelfTimingTest, TicksReadAsTheClocksNs) {
  TickRate rate;
  rate.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double ns_per_tick = rate.NsPerTick();
  ASSERT_GT(ns_per_tick, 0.0);
  const uint64_t mono = MonotonicNs(), ticks = Ticks();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double by_ticks = static_cast<double>(Ticks() - ticks) * ns_per_tick;
  const auto by_clock = static_cast<double>(MonotonicNs() - mono);
  EXPECT_NEAR(by_ticks / by_clock, 1.0, 0.1);
  // A pair of reads with nothing between them is short.
  EXPECT_LT(static_cast<double>(MeasureEmptyIntervalTicks()) * ns_per_tick, 10'000.0);
}

// An interval less the reads' own part; one that reads negative (a counter
// that went back between CPUs) counts as nothing, not as 2^64 ticks.
TEST(SelfTimingTest, TimedPartTakesOffTheReadsAndNeverWraps) {
  EXPECT_EQ(TimedPart(100, 30), 70u);
  EXPECT_EQ(TimedPart(20, 30), 0u);
  EXPECT_EQ(TimedPart(uint64_t{0} - 5, 30), 0u);
}

}  // namespace
}  // namespace gpuflame::inprocess
