// The launch route's join: launch hits (stacks without correlation IDs) to
// CUPTI's records of the same calls, by thread and time.
#include <gtest/gtest.h>

#include <vector>

#include "profiler/aggregate/launch_route_joiner.h"

namespace gpuflame::profiler {
namespace {

constexpr uint32_t kApi = GF_LAUNCH_API(1, 307);  // cuLaunchKernel's

gf_api_record Record(uint32_t ns_tid, uint64_t start, uint64_t end, uint32_t correlation) {
  return {.start_ns = start,
          .end_ns = end,
          .correlation = correlation,
          .tid = ns_tid,
          .cbid = 307,
          .domain = 1,
          .pad = 0,
          .result = 0};
}

struct Joined {
  std::vector<LaunchRouteJoiner::Launch> launches;
  LaunchRouteJoiner::JoinedFn fn() {
    return [this](const LaunchRouteJoiner::Launch& l) { launches.push_back(l); };
  }
};

TEST(LaunchRouteJoinerTest, EachRecordTakesTheHitJustBeforeItOnItsOwnThread) {
  LaunchRouteJoiner j;
  // Two threads launching side by side; namespace thread IDs 7 and 8 are
  // the host's 1007 and 1008.
  for (uint64_t i = 0; i < 5; i++) {
    j.OnHit(100, 7, 1007, 1'000'000 + i * 10'000, StackId(10 + i), kApi);
    j.OnHit(100, 8, 1008, 1'000'500 + i * 10'000, StackId(20 + i), kApi);
  }
  std::vector<gf_api_record> records;
  for (uint64_t i = 0; i < 5; i++) {
    records.push_back(Record(7, 1'002'500 + i * 10'000, 1'004'000 + i * 10'000, 500 + 2 * static_cast<uint32_t>(i)));
    records.push_back(Record(8, 1'003'000 + i * 10'000, 1'004'500 + i * 10'000, 501 + 2 * static_cast<uint32_t>(i)));
  }
  Joined out;
  j.OnRecords(100, records, out.fn());
  ASSERT_EQ(out.launches.size(), 10u);
  for (size_t i = 0; i < 5; i++) {
    EXPECT_EQ(out.launches[2 * i].correlation, 500 + 2 * i);
    EXPECT_EQ(out.launches[2 * i].stack, StackId(10 + i));
    EXPECT_EQ(out.launches[2 * i].tid, 1007u) << "the host's thread ID goes on";
    EXPECT_EQ(out.launches[2 * i + 1].stack, StackId(20 + i));
    EXPECT_EQ(out.launches[2 * i + 1].ts_ns, 1'000'500 + i * 10'000) << "the hit's time, not the record's";
  }
  EXPECT_EQ(j.stats().joined, 10u);
  EXPECT_EQ(j.held(), 0u);
}

TEST(LaunchRouteJoinerTest, ARecordWhoseHitWasNotTakenDoesNotStealTheCallBeforeIt) {
  LaunchRouteJoiner j;
  Joined out;
  // The uprobes went in between two calls: the first call's record has no
  // hit, and the hit before it (an earlier call's, already joined) must not
  // serve twice.
  j.OnHit(1, 7, 7, 1'000, StackId(1), kApi);
  j.OnRecords(1, std::vector{Record(7, 3'000, 5'000, 10)}, out.fn());
  j.OnRecords(1, std::vector{Record(7, 9'000, 11'000, 11)}, out.fn());  // its hit was missed
  ASSERT_EQ(out.launches.size(), 1u);
  EXPECT_EQ(j.stats().records_without_hit, 1u);
  // A hit left behind by a call whose record never came (the window closed
  // first) is passed over once a later call's record arrives.
  j.OnHit(1, 7, 7, 20'000, StackId(2), kApi);
  j.OnHit(1, 7, 7, 30'000, StackId(3), kApi);
  j.OnRecords(1, std::vector{Record(7, 32'000, 33'000, 13)}, out.fn());
  ASSERT_EQ(out.launches.size(), 2u);
  EXPECT_EQ(out.launches[1].stack, StackId(3));
  EXPECT_EQ(j.stats().hits_passed, 1u);
  // A hit from before the thread's previous record's end belongs to that
  // call, however close it is to the next record.
  j.OnHit(1, 7, 7, 32'500, StackId(4), kApi);  // inside the call that ended at 33,000
  j.OnRecords(1, std::vector{Record(7, 34'000, 35'000, 14)}, out.fn());
  EXPECT_EQ(out.launches.size(), 2u);
  EXPECT_EQ(j.stats().records_without_hit, 2u);
}

TEST(LaunchRouteJoinerTest, AHitTooLongBeforeARecordIsNotItsCall) {
  LaunchRouteJoiner j;
  Joined out;
  j.OnHit(1, 7, 7, 1'000'000, StackId(1), kApi);
  const uint64_t start = 1'000'000 + LaunchRouteJoiner::kMaxLeadNs + 1;
  j.OnRecords(1, std::vector{Record(7, start, start + 10, 5)}, out.fn());
  EXPECT_TRUE(out.launches.empty());
  EXPECT_EQ(j.stats().records_without_hit, 1u);
  EXPECT_EQ(j.stats().hits_passed, 1u);
  EXPECT_EQ(j.held(), 0u);
}

TEST(LaunchRouteJoinerTest, RecordsOfAnotherProcessOrThreadJoinNothing) {
  LaunchRouteJoiner j;
  Joined out;
  j.OnHit(1, 7, 7, 1'000, StackId(1), kApi);
  j.OnRecords(2, std::vector{Record(7, 2'000, 3'000, 5)}, out.fn());
  j.OnRecords(1, std::vector{Record(8, 2'000, 3'000, 6)}, out.fn());
  EXPECT_TRUE(out.launches.empty());
  EXPECT_EQ(j.stats().records_without_hit, 2u);
  EXPECT_EQ(j.held(), 1u);
}

TEST(LaunchRouteJoinerTest, HitsAreHeldForTheirTimeAndWithinTheirBound) {
  LaunchRouteJoiner j;
  j.OnHit(1, 7, 7, 1'000, StackId(1), kApi);
  j.OnHit(1, 8, 8, LaunchRouteJoiner::kHitTtlNs, StackId(2), kApi);
  j.Expire(LaunchRouteJoiner::kHitTtlNs + 2'000);
  EXPECT_EQ(j.stats().hits_expired, 1u);
  EXPECT_EQ(j.held(), 1u);
  j.ForgetProcess(1);
  EXPECT_EQ(j.stats().hits_expired, 2u);
  EXPECT_EQ(j.held(), 0u);
  // Full, the thread's oldest hits make room for its new ones (those are
  // the ones a coming record may want); a thread without any held drops its new one.
  for (size_t i = 0; i < LaunchRouteJoiner::kMaxHitsPerProcess + 3; i++) j.OnHit(3, 7, 7, 1000 + i, StackId(1), kApi);
  EXPECT_EQ(j.held(), LaunchRouteJoiner::kMaxHitsPerProcess);
  EXPECT_EQ(j.stats().hits_dropped, 3u);
  j.OnHit(3, 8, 8, 5'000'000, StackId(2), kApi);
  EXPECT_EQ(j.stats().hits_dropped, 4u);
  Joined out;
  const uint64_t last = 1000 + LaunchRouteJoiner::kMaxHitsPerProcess + 2;
  j.OnRecords(3, std::vector{Record(7, last + 1, last + 2, 9)}, out.fn());
  ASSERT_EQ(out.launches.size(), 1u);
  EXPECT_EQ(out.launches[0].ts_ns, last);
}

TEST(LaunchRouteJoinerTest, AHitOfAnotherEntryPointIsNotTheRecordsCall) {
  LaunchRouteJoiner j;
  Joined out;
  j.OnHit(1, 7, 7, 1'000, StackId(1), GF_LAUNCH_API(1, 652));         // cuLaunchKernelEx
  j.OnRecords(1, std::vector{Record(7, 2'000, 3'000, 5)}, out.fn());  // cuLaunchKernel's record
  EXPECT_TRUE(out.launches.empty());
  EXPECT_EQ(j.stats().api_mismatches, 1u);
  EXPECT_EQ(j.stats().records_without_hit, 1u);
  EXPECT_EQ(j.stats().hits_passed, 1u);
  EXPECT_EQ(j.held(), 0u);
}

TEST(LaunchRouteJoinerTest, AHitThatArrivesOutOfOrderIsStillFound) {
  LaunchRouteJoiner j;
  Joined out;
  j.OnHit(1, 7, 7, 5'000, StackId(2), kApi);
  j.OnHit(1, 7, 7, 1'000, StackId(1), kApi);
  j.OnRecords(1, std::vector{Record(7, 2'000, 3'000, 5), Record(7, 6'000, 7'000, 6)}, out.fn());
  ASSERT_EQ(out.launches.size(), 2u);
  EXPECT_EQ(out.launches[0].stack, StackId(1));
  EXPECT_EQ(out.launches[1].stack, StackId(2));
}

}  // namespace
}  // namespace gpuflame::profiler
