// cupti/correlation_check.h: whether the driver's launch callbacks carry the
// IDs their GPU work comes back with, judged from a process's first launch
// stacks.
#include "cupti/correlation_check.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpuflame::cupti {
namespace {

using Verdict = CorrelationCheck::Verdict;
constexpr uint64_t kS = 1'000'000'000;

gf_kernel_record Work(uint32_t correlation) {
  gf_kernel_record r{};
  r.kind = GF_GPU_KERNEL;
  r.correlation = correlation;
  return r;
}

// Fires kSamples launches at IDs |base| + 10, + 20, ...; the records that
// come back carry |work_id(i)| for the i-th (0: none comes).
template <typename WorkId>
void FireAndReturn(CorrelationCheck& c, uint32_t base, WorkId work_id) {
  std::vector<gf_kernel_record> records;
  for (uint32_t i = 0; i < CorrelationCheck::kSamples; i++) {
    c.Fired(base + 10 * (i + 1));
    const uint32_t id = work_id(i);
    if (id) records.push_back(Work(id));
  }
  c.Seen(records.data(), records.size());
}

// Records from well past the samples fired from |base|.
void MoveOn(CorrelationCheck& c, uint32_t base) {
  const gf_kernel_record later = Work(base + 10 * CorrelationCheck::kSamples + CorrelationCheck::kPastBy);
  c.Seen(&later, 1);
}

// One round: its samples in, the wait over, records past them. Returns the
// verdict at |now_ns| + the wait.
template <typename WorkId>
Verdict Round(CorrelationCheck& c, uint64_t now_ns, uint32_t base, WorkId work_id) {
  FireAndReturn(c, base, work_id);
  MoveOn(c, base);
  EXPECT_EQ(c.Decide(now_ns), Verdict::kPending);  // the wait starts when the samples are seen in
  return c.Decide(now_ns + CorrelationCheck::kWaitNs);
}

const auto kSame = [](uint32_t base) { return [base](uint32_t i) { return base + 10 * (i + 1); }; };
// Two launches in three through the runtime, whose work carries the
// runtime call's ID (one below the driver call's); the rest cuBLAS's,
// straight to the driver.
const auto kNested = [](uint32_t base) {
  return [base](uint32_t i) { return i % 3 == 0 ? base + 10 * (i + 1) : base + 10 * (i + 1) - 1; };
};

TEST(CorrelationCheckTest, StacksWhoseWorkCameBackJoin) {
  CorrelationCheck c;
  FireAndReturn(c, 0, kSame(0));
  MoveOn(c, 0);
  EXPECT_EQ(c.Decide(1 * kS), Verdict::kPending);
  EXPECT_EQ(c.Decide(1 * kS + CorrelationCheck::kWaitNs - 1), Verdict::kPending);
  EXPECT_EQ(c.Decide(1 * kS + CorrelationCheck::kWaitNs), Verdict::kJoins);
  EXPECT_EQ(c.missed(), 0u);
  EXPECT_EQ(c.held(), CorrelationCheck::kSamples);
}

TEST(CorrelationCheckTest, ADriverThatGivesNestedCallsIdsOfTheirOwnIsFoundTwice) {
  CorrelationCheck c;
  c.set_retry_ns(10 * kS);
  const uint32_t misses = CorrelationCheck::kSamples - (CorrelationCheck::kSamples + 2) / 3;
  // The first round's "does not join" is not believed yet.
  EXPECT_EQ(Round(c, 0, 0, kNested(0)), Verdict::kPending);
  EXPECT_EQ(c.first_round_missed(), misses);
  // Until the retry, nothing is sampled.
  FireAndReturn(c, 5000, kSame(5000));
  EXPECT_EQ(c.Decide(5 * kS), Verdict::kPending);
  EXPECT_EQ(c.Decide(12 * kS), Verdict::kPending);  // the second round starts
  EXPECT_EQ(Round(c, 13 * kS, 10000, kNested(10000)), Verdict::kDoesNotJoin);
  EXPECT_EQ(c.missed(), misses);
  // Decided: later records change nothing.
  FireAndReturn(c, 20000, kSame(20000));
  EXPECT_EQ(c.Decide(100 * kS), Verdict::kDoesNotJoin);
}

// A good driver's first samples may miss many: launches into a stream being
// captured into a CUDA graph never run under their IDs. The second round,
// later, joins: the stacks stay in the driver's call.
TEST(CorrelationCheckTest, AFirstRoundOfMissesTheSecondDoesNotConfirmIsNotBelieved) {
  CorrelationCheck c;
  c.set_retry_ns(10 * kS);
  EXPECT_EQ(Round(c, 0, 0, [](uint32_t) { return 0u; }), Verdict::kPending);
  EXPECT_EQ(c.first_round_missed(), CorrelationCheck::kSamples);
  EXPECT_EQ(c.Decide(11 * kS), Verdict::kPending);
  EXPECT_EQ(c.Decide(12 * kS), Verdict::kPending);  // the second round starts
  EXPECT_EQ(Round(c, 12 * kS, 10000, kSame(10000)), Verdict::kJoins);
  EXPECT_EQ(c.missed(), 0u);
}

TEST(CorrelationCheckTest, AFewMissingRecordsAreNotADriversFault) {
  // A failed launch, a dropped record: under one in kMissOneIn.
  const uint32_t misses = CorrelationCheck::kSamples / CorrelationCheck::kMissOneIn;
  CorrelationCheck c;
  EXPECT_EQ(Round(c, 0, 0, [&](uint32_t i) { return i < misses ? 0 : 10 * (i + 1); }), Verdict::kJoins);
  EXPECT_EQ(c.missed(), misses);
  // One more is over it.
  CorrelationCheck d;
  EXPECT_EQ(Round(d, 0, 0, [&](uint32_t i) { return i <= misses ? 0 : 10 * (i + 1); }), Verdict::kPending);
  EXPECT_EQ(d.first_round_missed(), misses + 1);
}

TEST(CorrelationCheckTest, NoVerdictUntilRecordsComeFromWellPastTheSamples) {
  CorrelationCheck c;
  for (uint32_t i = 1; i < CorrelationCheck::kSamples; i++) c.Fired(i);
  EXPECT_EQ(c.Decide(0), Verdict::kPending);
  EXPECT_EQ(c.Decide(100 * kS), Verdict::kPending);  // one sample short
  c.Fired(CorrelationCheck::kSamples);
  c.Decide(100 * kS);
  // Nothing has come back yet (the GPU is behind, or activity is off): no
  // verdict, however long.
  EXPECT_EQ(c.Decide(1000 * kS), Verdict::kPending);
  const gf_kernel_record almost = Work(CorrelationCheck::kSamples + CorrelationCheck::kPastBy - 1);
  c.Seen(&almost, 1);
  EXPECT_EQ(c.Decide(1000 * kS), Verdict::kPending);
  // Records that are not GPU work do not count as having come back.
  gf_kernel_record window = Work(CorrelationCheck::kSamples + CorrelationCheck::kPastBy);
  window.kind = GF_GPU_ACTIVITY_WINDOW;
  c.Seen(&window, 1);
  EXPECT_EQ(c.Decide(1000 * kS), Verdict::kPending);
  MoveOn(c, 0);
  EXPECT_EQ(c.Decide(1000 * kS), Verdict::kPending);  // none of the samples' own came: a first round
  EXPECT_EQ(c.first_round_missed(), CorrelationCheck::kSamples);
  // ID 0 (a source that gives none) is never a sample.
  CorrelationCheck z;
  for (uint32_t i = 0; i < 2 * CorrelationCheck::kSamples; i++) z.Fired(0);
  MoveOn(z, 0);
  EXPECT_EQ(z.Decide(1000 * kS), Verdict::kPending);
}

// Correlation IDs are 32 bits and wrap in a long launch-bound run: samples
// on both sides of the wrap, and records past them, still decide.
TEST(CorrelationCheckTest, IdsThatWrapAreComparedByTheirDifference) {
  const uint32_t base = 0u - 10 * (CorrelationCheck::kSamples / 2) - 5;  // no sample's ID is 0
  CorrelationCheck c;
  EXPECT_EQ(Round(c, 0, base, kSame(base)), Verdict::kJoins);
  // Records from before the samples (a lower ID after the wrap's) are not "past" them.
  CorrelationCheck d;
  FireAndReturn(d, base, kSame(base));
  const gf_kernel_record before = Work(base - 5);
  d.Seen(&before, 1);
  d.Decide(0);
  EXPECT_EQ(d.Decide(1000 * kS), Verdict::kPending);
}

// The stacks are taken at the runtime's calls for another reason (API
// spans): the check stops and never decides.
TEST(CorrelationCheckTest, AnAbandonedCheckNeverDecides) {
  CorrelationCheck c;
  c.Abandon();
  EXPECT_EQ(Round(c, 0, 0, kNested(0)), Verdict::kPending);
  EXPECT_EQ(c.Decide(1000 * kS), Verdict::kPending);
  EXPECT_EQ(c.held(), 0u);
}

TEST(CorrelationCheckTest, LaunchingThreadsAndBufferThreadsAtOnce) {
  // Four launching threads and two returning records, as CUPTI's buffer
  // threads would; the check takes its samples from whichever fire first.
  CorrelationCheck c;
  std::atomic<uint32_t> next{1};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; i++) c.Fired(next.fetch_add(1));
    });
  for (int t = 0; t < 2; t++)
    threads.emplace_back([&, t] {
      for (uint32_t id = 1 + t; id <= 6000; id += 2) {
        const gf_kernel_record r = Work(id);
        c.Seen(&r, 1);
      }
    });
  for (std::thread& t : threads) t.join();
  // Records raced their launches' Fired; those seen before being held are
  // missed. Every launch's record again, as a late buffer would bring them:
  for (uint32_t id = 1; id <= 6000; id++) {
    const gf_kernel_record r = Work(id);
    c.Seen(&r, 1);
  }
  c.Decide(0);
  EXPECT_EQ(c.Decide(CorrelationCheck::kWaitNs), Verdict::kJoins);
  EXPECT_EQ(c.held(), CorrelationCheck::kSamples);
  EXPECT_EQ(c.missed(), 0u);
}

}  // namespace
}  // namespace gpuflame::cupti
