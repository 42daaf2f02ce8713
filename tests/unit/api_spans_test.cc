// The injection library's buffer of CUDA API calls (cupti/api_spans.h):
// whole, in order, in runs the probe takes, and bounded with every call it
// could not keep counted.
#include "cupti/api_spans.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpuflame::cupti {
namespace {

gf_api_record Call(uint32_t correlation, uint32_t tid = 1) {
  gf_api_record r{};
  r.start_ns = correlation;
  r.end_ns = correlation + 1;
  r.correlation = correlation;
  r.tid = tid;
  return r;
}

struct Drained {
  std::vector<gf_api_record> records;
  std::vector<size_t> runs;
  uint64_t dropped = 0;
};

Drained Drain(ApiSpans& spans) {
  Drained d;
  spans.Drain([&](const gf_api_record* r, size_t n, uint64_t dropped) {
    d.records.insert(d.records.end(), r, r + n);
    d.runs.push_back(n);
    d.dropped = dropped;
  });
  return d;
}

TEST(ApiSpansTest, CallsGoOutInOrderInRunsTheProbeTakes) {
  ApiSpans spans;
  spans.Add(Call(1));  // before an agent asked: not kept, counted
  spans.Enable();
  for (uint32_t i = 0; i < 300; i++) spans.Add(Call(100 + i));
  Drained d = Drain(spans);
  ASSERT_EQ(d.records.size(), 300u);
  for (uint32_t i = 0; i < 300; i++) EXPECT_EQ(d.records[i].correlation, 100 + i);
  EXPECT_EQ(d.runs, (std::vector<size_t>{GF_API_BATCH_MAX, GF_API_BATCH_MAX, 300 - 2 * GF_API_BATCH_MAX}));
  EXPECT_EQ(d.dropped, 1u);
  EXPECT_TRUE(Drain(spans).records.empty());  // nothing twice
}

TEST(ApiSpansTest, AFullBufferCountsWhatItCouldNotKeep) {
  ApiSpans spans;
  spans.Enable();
  for (size_t i = 0; i < ApiSpans::kCapacity + 10; i++) spans.Add(Call(static_cast<uint32_t>(i)));
  Drained d = Drain(spans);
  EXPECT_EQ(d.records.size(), ApiSpans::kCapacity);
  EXPECT_EQ(d.dropped, 10u);
  spans.Add(Call(7));  // room again after the drain
  EXPECT_EQ(Drain(spans).records.size(), 1u);
}

TEST(ApiSpansTest, ThreadsAddingWhileTheFlusherDrainsLoseNothing) {
  ApiSpans spans;
  spans.Enable();
  constexpr uint32_t kThreads = 4, kEach = 50'000;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; t++)
    threads.emplace_back([&spans, t] {
      for (uint32_t i = 0; i < kEach; i++) spans.Add(Call(i, t));
    });
  std::vector<uint32_t> next(kThreads, 0);
  size_t seen = 0;
  auto take = [&] {
    for (const gf_api_record& r : Drain(spans).records) {
      ASSERT_LT(r.tid, kThreads);
      // Each thread's calls in its order, each once (a full buffer may
      // have dropped some in between: counted).
      EXPECT_GE(r.correlation, next[r.tid]);
      next[r.tid] = r.correlation + 1;
      seen++;
    }
  };
  for (int i = 0; i < 1000 && seen + spans.dropped() < kThreads * kEach; i++) take();
  for (std::thread& t : threads) t.join();
  take();
  EXPECT_EQ(seen + spans.dropped(), size_t{kThreads} * kEach);  // each call kept or counted, once
}

}  // namespace
}  // namespace gpuflame::cupti
