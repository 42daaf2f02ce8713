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

// Fires kSamples launches at IDs 10, 20, ...; the records that come back
// carry |work_id(i)| for the i-th.
template <typename WorkId>
void FireAndReturn(CorrelationCheck& c, WorkId work_id) {
  std::vector<gf_kernel_record> records;
  for (uint32_t i = 0; i < CorrelationCheck::kSamples; i++) {
    c.Fired(10 * (i + 1));
    records.push_back(Work(work_id(i)));
  }
  c.Seen(records.data(), records.size());
}

// Records from well past the last fired launch.
void MoveOn(CorrelationCheck& c) {
  const gf_kernel_record later = Work(10 * CorrelationCheck::kSamples + CorrelationCheck::kPastBy);
  c.Seen(&later, 1);
}

TEST(CorrelationCheckTest, StacksWhoseWorkCameBackJoin) {
  CorrelationCheck c;
  FireAndReturn(c, [](uint32_t i) { return 10 * (i + 1); });
  MoveOn(c);
  EXPECT_EQ(c.Decide(1 * kS), Verdict::kPending);  // the wait starts when the samples are seen in
  EXPECT_EQ(c.Decide(1 * kS + CorrelationCheck::kWaitNs - 1), Verdict::kPending);
  EXPECT_EQ(c.Decide(1 * kS + CorrelationCheck::kWaitNs), Verdict::kJoins);
  EXPECT_EQ(c.missed(), 0u);
  EXPECT_EQ(c.held(), CorrelationCheck::kSamples);
}

TEST(CorrelationCheckTest, ADriverThatGivesNestedCallsIdsOfTheirOwnIsFound) {
  // Two launches in three through the runtime, whose work carries the
  // runtime call's ID (one below the driver call's); the rest cuBLAS's,
  // straight to the driver.
  CorrelationCheck c;
  FireAndReturn(c, [](uint32_t i) { return i % 3 == 0 ? 10 * (i + 1) : 10 * (i + 1) - 1; });
  MoveOn(c);
  c.Decide(0);
  EXPECT_EQ(c.Decide(CorrelationCheck::kWaitNs), Verdict::kDoesNotJoin);
  EXPECT_EQ(c.missed(), CorrelationCheck::kSamples - (CorrelationCheck::kSamples + 2) / 3);
  // Decided once: later records change nothing.
  FireAndReturn(c, [](uint32_t i) { return 10 * (i + 1); });
  EXPECT_EQ(c.Decide(100 * kS), Verdict::kDoesNotJoin);
}

TEST(CorrelationCheckTest, AFewMissingRecordsAreNotADriversFault) {
  // A failed launch, a dropped record: under one in kMissOneIn.
  const uint32_t misses = CorrelationCheck::kSamples / CorrelationCheck::kMissOneIn;
  CorrelationCheck c;
  FireAndReturn(c, [&](uint32_t i) { return i < misses ? 1 : 10 * (i + 1); });
  MoveOn(c);
  c.Decide(0);
  EXPECT_EQ(c.Decide(CorrelationCheck::kWaitNs), Verdict::kJoins);
  EXPECT_EQ(c.missed(), misses);
  // One more is over it.
  CorrelationCheck d;
  FireAndReturn(d, [&](uint32_t i) { return i <= misses ? 1 : 10 * (i + 1); });
  MoveOn(d);
  d.Decide(0);
  EXPECT_EQ(d.Decide(CorrelationCheck::kWaitNs), Verdict::kDoesNotJoin);
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
  MoveOn(c);
  EXPECT_EQ(c.Decide(1000 * kS), Verdict::kDoesNotJoin);  // none of the samples' own came
  // ID 0 (a source that gives none) is never a sample.
  CorrelationCheck z;
  for (uint32_t i = 0; i < 2 * CorrelationCheck::kSamples; i++) z.Fired(0);
  MoveOn(z);
  EXPECT_EQ(z.Decide(1000 * kS), Verdict::kPending);
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
