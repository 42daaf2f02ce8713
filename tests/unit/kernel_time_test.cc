// Kernel time without a GPU: CUPTI activity buffers built from CUDA's real
// CUPTI structs and walked by the real cuptiActivityGetNextRecord (it needs
// no driver), then the agent's correlation join with its sampling rules.
#include <cupti.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cupti/activity_converter.h"
#include "cupti/activity_tuning.h"
#include "cupti/activity_windows.h"
#include "cupti/device_uuids.h"
#include "cupti/duty_cycle.h"
#include "cupti/launch_sampler.h"
#include "cupti/token_bucket.h"
#include "profiler/aggregate/kernel_joiner.h"
#include "profiler/utilization/lane_uuids.h"

namespace gpuflame {
namespace {

class Buffer {
 public:
  template <typename Record>
  void Add(const Record& r) {
    size_t at = bytes_.size();
    bytes_.resize(at + sizeof(r));
    std::memcpy(bytes_.data() + at, &r, sizeof(r));
  }
  uint8_t* data() { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

CUpti_ActivityKernel10 Kernel(const char* name, uint64_t start, uint64_t end, uint32_t corr, uint32_t graph = 0) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.correlationId = corr;
  k.deviceId = 3;
  k.streamId = 14;
  k.graphId = graph;
  return k;
}

struct Recorder : cupti::ActivitySink {
  std::vector<std::pair<uint32_t, std::string>> names;
  std::vector<std::vector<gf_kernel_record>> batches;
  std::vector<size_t> names_before_batch;  // how many names were announced before each batch
  void Name(uint32_t id, const char* name) override { names.push_back({id, name}); }
  void Batch(const gf_kernel_record* r, size_t n) override {
    batches.emplace_back(r, r + n);
    names_before_batch.push_back(names.size());
  }
};

TEST(ActivityConverterTest, ConvertsCuptiRecordsInBatchesWithNamesFirst) {
  Buffer b;
  for (uint32_t i = 0; i < 100; i++) b.Add(Kernel(i % 2 ? "_Z4gemmv" : "relu", 1000 * i, 1000 * i + 500, 7 + i));
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.start = 10;
  m.end = 90;
  m.correlationId = 500;
  b.Add(m);
  CUpti_ActivityMemset4 s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.start = 5;
  s.end = 6;
  s.correlationId = 501;
  b.Add(s);
  cupti::ActivityConverter conv;
  Recorder rec;
  cupti::ConvertStats st = conv.Convert(b.data(), b.size(), cuptiActivityGetNextRecord, rec);
  EXPECT_EQ(st.kernels, 100u);
  EXPECT_EQ(st.memcpys, 1u);
  EXPECT_EQ(st.memsets, 1u);
  ASSERT_EQ(rec.batches.size(), 2u);  // 64 + 38
  EXPECT_EQ(rec.batches[0].size(), size_t{GF_KERNEL_BATCH_MAX});
  EXPECT_EQ(rec.batches[1].size(), 38u);
  ASSERT_EQ(rec.names.size(), 2u);
  EXPECT_EQ(rec.names_before_batch[0], 2u) << "names are announced before the batch that uses them";
  const gf_kernel_record& k1 = rec.batches[0][1];
  EXPECT_EQ(k1.kind, GF_GPU_KERNEL);
  EXPECT_EQ(k1.start_ns, 1000u);
  EXPECT_EQ(k1.end_ns, 1500u);
  EXPECT_EQ(k1.correlation, 8u);
  EXPECT_EQ(k1.device, 3u);
  EXPECT_EQ(k1.stream, 14u);
  EXPECT_EQ(rec.names[k1.name_id - 1].second, "_Z4gemmv");
  const gf_kernel_record& copy = rec.batches[1][36];
  EXPECT_EQ(copy.kind, GF_GPU_MEMCPY);
  EXPECT_EQ(copy.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(copy.correlation, 500u);
  EXPECT_EQ(rec.batches[1][37].kind, GF_GPU_MEMSET);
  // A second buffer reuses the IDs: no name is announced twice.
  Buffer again;
  again.Add(Kernel("relu", 1, 2, 1000));
  conv.Convert(again.data(), again.size(), cuptiActivityGetNextRecord, rec);
  EXPECT_EQ(rec.names.size(), 2u);
  EXPECT_EQ(rec.batches.back()[0].name_id, rec.batches[0][0].name_id);
}

struct LaunchRecorder : Recorder {
  std::vector<std::vector<gf_api_record>> launch_batches;
  void LaunchRecords(const gf_api_record* r, size_t n) override { launch_batches.emplace_back(r, r + n); }
};

CUpti_ActivityAPI DriverCall(uint32_t cbid, uint64_t start, uint64_t end, uint32_t tid, uint32_t corr) {
  CUpti_ActivityAPI a{};
  a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.processId = 4242;
  a.threadId = tid;
  a.correlationId = corr;
  a.returnValue = 0;
  return a;
}

TEST(ActivityConverterTest, TheDriversLaunchRecordsGoOutOnTheMonotonicClockBesideTheKernels) {
  Buffer b;
  b.Add(Kernel("relu", 5'000'100, 5'000'900, 7));
  for (uint32_t i = 0; i < 130; i++)
    b.Add(DriverCall(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 5'000'000 + 10 * i, 5'000'005 + 10 * i, 77, 100 + i));
  b.Add(DriverCall(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 6'000'000, 6'000'004, 0, 999));  // no thread: not sent
  cupti::ActivityConverter conv;
  LaunchRecorder rec;
  // No clock pair yet: nothing can be put on the monotonic clock.
  cupti::ConvertStats before = conv.Convert(b.data(), b.size(), cuptiActivityGetNextRecord, rec);
  EXPECT_EQ(before.launch_records, 0u);
  EXPECT_EQ(before.launch_records_unconverted, 131u);
  EXPECT_TRUE(rec.launch_batches.empty());
  // CUPTI's clock 4,000,000 ns ahead of CLOCK_MONOTONIC, and the route in use.
  conv.SetClock(9'000'000, 5'000'000);
  cupti::ConvertStats clock_only = conv.Convert(b.data(), b.size(), cuptiActivityGetNextRecord, rec);
  EXPECT_EQ(clock_only.launch_records, 0u) << "a clock pair alone (every agent's status) is not the route";
  conv.SetRoute();
  cupti::ConvertStats st = conv.Convert(b.data(), b.size(), cuptiActivityGetNextRecord, rec);
  EXPECT_EQ(st.kernels, 1u);
  EXPECT_EQ(st.launch_records, 130u);
  EXPECT_EQ(st.launch_records_unconverted, 1u);
  ASSERT_EQ(rec.launch_batches.size(), 2u);
  EXPECT_EQ(rec.launch_batches[0].size(), size_t{GF_API_BATCH_MAX});
  EXPECT_EQ(rec.launch_batches[1].size(), 2u);
  const gf_api_record& r = rec.launch_batches[0][1];
  EXPECT_EQ(r.start_ns, 1'000'010u);
  EXPECT_EQ(r.end_ns, 1'000'015u);
  EXPECT_EQ(r.tid, 77u);
  EXPECT_EQ(r.correlation, 101u);
  EXPECT_EQ(r.cbid, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  EXPECT_EQ(r.domain, 1);
  // The kernel's record is untouched: CUPTI's clock, as ever.
  ASSERT_FALSE(rec.batches.empty());
  EXPECT_EQ(rec.batches.back()[0].start_ns, 5'000'100u);
}

TEST(ActivityConverterTest, ANewAgentHearsEachNameAgainAtItsNextUse) {
  cupti::ActivityConverter conv;
  Recorder rec;
  Buffer first;
  first.Add(Kernel("relu", 1, 2, 1));
  first.Add(Kernel("gemm", 3, 4, 2));
  conv.Convert(first.data(), first.size(), cuptiActivityGetNextRecord, rec);
  ASSERT_EQ(rec.names.size(), 2u);
  conv.SayNamesAgain();
  Buffer later;
  later.Add(Kernel("gemm", 5, 6, 3));
  later.Add(Kernel("gemm", 7, 8, 4));
  conv.Convert(later.data(), later.size(), cuptiActivityGetNextRecord, rec);
  // Only the name in use, once, under its old ID, before its batch.
  ASSERT_EQ(rec.names.size(), 3u);
  EXPECT_EQ(rec.names[2], rec.names[1]);
  EXPECT_EQ(rec.names_before_batch.back(), 3u);
  EXPECT_EQ(rec.batches.back()[0].name_id, rec.names[1].first);
  EXPECT_EQ(conv.names(), 2u);
}

TEST(ActivityConverterTest, EmptyAndTruncatedBuffersAreHarmless) {
  cupti::ActivityConverter conv;
  Recorder rec;
  EXPECT_EQ(conv.Convert(nullptr, 0, cuptiActivityGetNextRecord, rec).kernels, 0u);
  Buffer b;
  b.Add(Kernel("k", 1, 2, 3));
  // Half a record: CUPTI's walk stops; nothing is invented.
  cupti::ConvertStats st = conv.Convert(b.data(), b.size() / 2, cuptiActivityGetNextRecord, rec);
  EXPECT_EQ(st.kernels, 0u);
  EXPECT_TRUE(rec.batches.empty());
}

// The library's device record, read back by the agent: NVML's text of the
// driver's bytes, in order.
TEST(DeviceUuidsTest, TheAgentReadsTheLibrarysRecordAsNvmlWritesTheUuid) {
  const unsigned char uuid[16] = {0xc3, 0x9a, 0x01, 0xff, 0x10, 0x20, 0x4e, 0x5d,
                                  0x8f, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc};
  const gf_kernel_record r = cupti::DeviceRecord(3, uuid);
  EXPECT_EQ(r.kind, GF_GPU_DEVICE);
  EXPECT_EQ(r.device, 3u);
  EXPECT_FALSE(GF_GPU_IS_WORK(r.kind));
  EXPECT_EQ(profiler::utilization::GpuUuidText(r), "GPU-c39a01ff-1020-4e5d-8f00-123456789abc");
}

TEST(TokenBucketTest, RateAndBurst) {
  cupti::TokenBucket b(/*rate=*/10, /*burst=*/2);
  uint64_t t = 1'000'000'000;
  EXPECT_TRUE(b.Take(t));
  EXPECT_TRUE(b.Take(t));
  EXPECT_FALSE(b.Take(t));               // burst spent
  EXPECT_FALSE(b.Take(t + 50'000'000));  // half a token after 50 ms
  EXPECT_TRUE(b.Take(t + 100'000'000));  // one after 100 ms
  int taken = 0;
  for (int i = 1; i <= 1050; i++) taken += b.Take(t + 100'000'000 + i * 1'000'000ull);  // 1.05 s more
  EXPECT_EQ(taken, 10);
  cupti::TokenBucket unlimited(0, 0);
  for (int i = 0; i < 100; i++) EXPECT_TRUE(unlimited.Take(t));
}

TEST(LaunchSamplerTest, LaunchesLateInABurstAreTakenAsOftenAsEarlyOnes) {
  // A training step's main thread, as on the H200: 200 launches of the
  // forward pass in 0.2 ms, 10 ms blocked in backward(), then the
  // optimizer's 4 kernels x 10. A token bucket alone spent its refill on the
  // forward pass and never took an optimizer kernel.
  cupti::LaunchSampler sampler(/*rate_per_s=*/1000, /*seed=*/99);
  cupti::TokenBucket bucket_only(1000, 101);
  std::map<std::string, int> taken, bucket_taken;
  uint64_t t = 1'000'000'000;
  for (int step = 0; step < 400; step++) {
    for (int i = 0; i < 200; i++, t += 1'000) {
      taken["forward"] += sampler.Take(t);
      bucket_taken["forward"] += bucket_only.Take(t);
    }
    t += 10'000'000;
    for (int k = 0; k < 4; k++)
      for (int i = 0; i < 10; i++, t += 1'000) {
        const std::string name = "optimizer" + std::to_string(k);
        taken[name] += sampler.Take(t);
        bucket_taken[name] += bucket_only.Take(t);
      }
  }
  EXPECT_EQ(bucket_taken["optimizer3"], 0) << "the bias this fixes";
  // Per launch, every kernel's chance is the same (4000 launches each of
  // the optimizer's, 80000 of the forward's; a fixed seed: no flake).
  const double forward = taken["forward"] / 80000.0;
  for (int k = 0; k < 4; k++) {
    const double opt = taken["optimizer" + std::to_string(k)] / 4000.0;
    EXPECT_GT(opt, forward * 0.6) << k;
    EXPECT_LT(opt, forward * 1.6) << k;
  }
  // And about the wanted rate: 1000 per second over 400 x 10.24 ms (4096).
  int total = 0;
  for (const auto& [name, n] : taken) total += n;
  EXPECT_GT(total, 3000);
  EXPECT_LT(total, 5000);  // the first 256 launches are all taken, before a rate is known
  cupti::LaunchSampler every(0, 1);
  for (int i = 0; i < 1000; i++) EXPECT_TRUE(every.Take(t));
}

TEST(DutyCycleTest, EachPeriodHasItsShareAndEveryTickTheSameChance) {
  constexpr uint32_t kOn = 3, kOneIn = 5, kPeriod = kOn * kOneIn;
  cupti::DutyCycle cycle(kOn, kOneIn, /*seed=*/12345);
  EXPECT_EQ(cycle.weight(), kOneIn);
  std::vector<int> on_at(kPeriod, 0);
  constexpr int kPeriods = 3000;
  for (int p = 0; p < kPeriods; p++) {
    int on = 0;
    for (uint32_t t = 0; t < kPeriod; t++) {
      const bool tick = cycle.Next();
      on += tick;
      on_at[t] += tick;
    }
    ASSERT_EQ(on, static_cast<int>(kOn)) << "period " << p;
  }
  // Every position in the period, the edges included, is on about one
  // period in five (expected 600; a fixed seed, so this cannot flake).
  for (uint32_t t = 0; t < kPeriod; t++) {
    EXPECT_GT(on_at[t], kPeriods / static_cast<int>(kOneIn) * 8 / 10) << "tick " << t;
    EXPECT_LT(on_at[t], kPeriods / static_cast<int>(kOneIn) * 12 / 10) << "tick " << t;
  }
  cupti::DutyCycle always(1, 1, 7);
  for (int i = 0; i < 100; i++) EXPECT_TRUE(always.Next());
  EXPECT_EQ(always.weight(), 1u);
}

// The library opens its callbacks' gate a tick before activity goes on
// (kernel_time_cupti.cc's SetGate), by Peek: it must say what the next
// Next() will, across period boundaries too (each period's phase is drawn
// at random).
TEST(DutyCycleTest, PeekSaysWhatTheNextTickWillBe) {
  cupti::DutyCycle cycle(2, 7, /*seed=*/99);
  int on = 0;
  for (int t = 0; t < 14 * 500; t++) {
    const bool peeked = cycle.Peek();
    const bool next = cycle.Next();
    ASSERT_EQ(peeked, next) << "tick " << t;
    on += next;
  }
  EXPECT_EQ(on, 2 * 500);
  cupti::DutyCycle always(1, 1, 7);
  EXPECT_TRUE(always.Peek());
}

// Thrift changes the share mid-run (kernel_time_cupti.cc's ThriftActivity):
// the weighted count of on ticks must still estimate every tick, whenever
// the change comes. Cutting a period short where its window happens to be
// leaned high (by about 4 ticks a change at 10 on in 100, in a review's
// simulation); starting the new share with the next period does not. Peek
// stays true to Next across the change.
TEST(DutyCycleTest, AChangeOfShareKeepsTheEstimateUnbiased) {
  constexpr int kTicks = 400, kRuns = 20000;
  double sum = 0;
  for (int run = 0; run < kRuns; run++) {
    cupti::DutyCycle cycle(10, 10, /*seed=*/1000 + run);
    const int change_at = 5 + run % 97;  // every phase of the first period and beyond
    double estimate = 0;
    for (int t = 0; t < kTicks; t++) {
      if (t == change_at) cycle.SetOneIn(20);
      const bool peeked = cycle.Peek();
      const bool on = cycle.Next();
      ASSERT_EQ(peeked, on) << "run " << run << " tick " << t;
      if (on) estimate += cycle.weight();
    }
    EXPECT_EQ(cycle.one_in(), 20u);
    sum += estimate;
  }
  // Fixed seeds: cannot flake. The mean's spread is about 1 tick.
  EXPECT_NEAR(sum / kRuns, kTicks, 4) << "a change of share biased the estimate";
}

TEST(ActivityWindowsTest, ARecordTakesTheWeightOfTheWindowItStartedIn) {
  cupti::ActivityWindows w;
  EXPECT_EQ(w.WeightAt(5), 1) << "no window yet: itself";
  w.Open(100, 1);   // start-up, seen whole
  w.Open(1000, 10);  // then one period in ten
  EXPECT_EQ(w.WeightAt(999), 1) << "launched in start-up, ran after it";
  EXPECT_EQ(w.WeightAt(1000), 10);
  EXPECT_EQ(w.WeightAt(5000), 10);
  EXPECT_EQ(w.WeightAt(50), 1) << "older than every window: the oldest's";
  for (uint64_t t = 2000; t < 2100; t++) w.Open(t, 7);  // the ring wraps
  EXPECT_EQ(w.WeightAt(1500), 7);
  w.Open(3000, 0);
  EXPECT_EQ(w.WeightAt(3000), 1) << "weight 0 means itself";
}

TEST(ActivityConverterTest, StampsEachRecordWithItsWindowsWeight) {
  Buffer b;
  b.Add(Kernel("k", 500, 600, 1));
  b.Add(Kernel("k", 1500, 1600, 2));
  cupti::ActivityWindows windows;
  windows.Open(0, 1);
  windows.Open(1000, 10);
  cupti::ActivityConverter conv;
  Recorder rec;
  conv.Convert(b.data(), b.size(), cuptiActivityGetNextRecord, rec, &windows);
  ASSERT_EQ(rec.batches.size(), 1u);
  EXPECT_EQ(rec.batches[0][0].weight, 1);
  EXPECT_EQ(rec.batches[0][1].weight, 10);
  Recorder plain;
  conv.Convert(b.data(), b.size(), cuptiActivityGetNextRecord, plain);
  EXPECT_EQ(plain.batches[0][1].weight, 1) << "no duty cycle: every record is itself";
}

// ---- the agent's join ----

class KernelJoinerTest : public ::testing::Test {
 protected:
  profiler::StackId Launch(const std::string& frame) {
    symbolizer::Frame f;
    f.kind = symbolizer::FrameKind::kPython;
    f.name = frame;
    profiler::StackInfo info;
    info.pid = 42;
    info.domain = GF_DOMAIN_LAUNCH;
    info.frames.push_back(frames.Intern(f));
    return stacks.Insert("L" + frame, info);
  }
  gf_kernel_record Rec(uint32_t corr, uint32_t name, uint64_t nanos, uint32_t graph = 0) {
    gf_kernel_record r{};
    r.kind = GF_GPU_KERNEL;
    r.correlation = corr;
    r.name_id = name;
    r.start_ns = 1000;
    r.end_ns = 1000 + nanos;
    r.graph_id = graph;
    return r;
  }
  // "frame;leaf" -> {count, nanos}
  std::map<std::string, profiler::TimeCounters> Totals() {
    std::map<std::string, profiler::TimeCounters> out;
    for (const auto& [key, c] : time.totals()) {
      std::string s;
      for (profiler::FrameId f : stacks.Get(key.stack).frames) s += (s.empty() ? "" : ";") + frames.Get(f).name;
      out[s].count += c.count;
      out[s].nanos += c.nanos;
      out[s].observed_nanos += c.observed_nanos;
    }
    return out;
  }
  profiler::StackTable stacks;
  profiler::FrameTable frames;
  profiler::TimeTracker time;
  profiler::KernelJoiner joiner{stacks, frames, time};
};

TEST_F(KernelJoinerTest, JoinsByCorrelationAndKeepsGraphLaunchesForAllTheirKernels) {
  joiner.OnName(42, 1, "_ZN2at6native13reduce_kernelILi512ELi1EEEvv");
  joiner.OnName(42, 2, "attn");
  joiner.OnLaunch(42, 100, Launch("Model > forward"), 1);
  joiner.OnLaunch(42, 101, Launch("Model > backward"), 1);
  std::vector<gf_kernel_record> recs = {Rec(100, 1, 300), Rec(101, 2, 50, 9), Rec(101, 2, 70, 9), Rec(101, 1, 5, 9)};
  joiner.OnRecords(42, recs, 2);
  joiner.Flush(3);
  auto t = Totals();
  EXPECT_EQ(t["Model > forward;void at::native::reduce_kernel<512, 1>()"].nanos, 300);
  EXPECT_EQ(t["Model > backward;attn"].nanos, 120);
  EXPECT_EQ(t["Model > backward;attn"].count, 2);
  EXPECT_EQ(t["Model > backward;void at::native::reduce_kernel<512, 1>()"].nanos, 5);
  EXPECT_EQ(joiner.stats().joined, 4u);
}

TEST_F(KernelJoinerTest, ARecordWhoseNameComesLaterWaitsForIt) {
  // An agent that attached after the library said "gemm": the library says
  // it again at its next use, maybe after a batch that used it.
  joiner.OnLaunch(42, 1, Launch("A"), 1);
  joiner.OnRecords(42, std::vector<gf_kernel_record>{Rec(1, 7, 100), Rec(2, 8, 50)}, 2);
  joiner.Flush(3);
  EXPECT_EQ(joiner.waiting_for_names(), 2u);
  EXPECT_TRUE(Totals().empty());
  joiner.OnName(42, 7, "gemm");
  EXPECT_EQ(joiner.waiting_for_names(), 1u);
  EXPECT_EQ(Totals()["A;gemm"].nanos, 100);
  // One whose name never comes goes on unnamed after kUnnamedTtlNs (or at
  // the end of a recording), counted as such.
  joiner.Flush(2 + profiler::KernelJoiner::kUnnamedTtlNs - 1);
  EXPECT_EQ(joiner.waiting_for_names(), 1u);
  joiner.Flush(2 + profiler::KernelJoiner::kUnnamedTtlNs);
  EXPECT_EQ(joiner.waiting_for_names(), 0u);
  EXPECT_EQ(Totals()["[launch stack not sampled];[kernel 8]"].nanos, 50);
  EXPECT_EQ(joiner.stats().unknown_names, 1u);
  EXPECT_EQ(joiner.stats().records, 2u);
}

TEST_F(KernelJoinerTest, UnsampledKernelsAreChargedBySampledShareExactly) {
  joiner.OnName(42, 1, "gemm");
  joiner.OnName(42, 2, "never_sampled");
  // gemm sampled twice from A, once from B.
  joiner.OnLaunch(42, 1, Launch("A"), 1);
  joiner.OnLaunch(42, 2, Launch("A"), 1);
  joiner.OnLaunch(42, 3, Launch("B"), 1);
  std::vector<gf_kernel_record> recs = {Rec(1, 1, 10), Rec(2, 1, 10), Rec(3, 1, 10)};
  // 7 gemms and 2 others whose launches were not sampled, 1000 ns each.
  for (uint32_t c = 10; c < 17; c++) recs.push_back(Rec(c, 1, 1000));
  recs.push_back(Rec(20, 2, 1000));
  recs.push_back(Rec(21, 2, 1000));
  joiner.OnRecords(42, recs, 2);
  joiner.Flush(3);
  auto t = Totals();
  // 7000 ns split 2:1 -> 4667 + 2333 (largest remainder), counts 5 + 2.
  EXPECT_EQ(t["A;gemm"].nanos, 20 + 4667);
  EXPECT_EQ(t["B;gemm"].nanos, 10 + 2333);
  EXPECT_EQ(t["A;gemm"].count + t["B;gemm"].count, 10);
  EXPECT_EQ(t["[launch stack not sampled];never_sampled"].nanos, 2000);
  EXPECT_EQ(t["[launch stack not sampled];never_sampled"].count, 2);
  EXPECT_EQ(joiner.stats().scaled, 7u);
  EXPECT_EQ(joiner.stats().unattributed, 2u);
}

TEST_F(KernelJoinerTest, WeightedRecordsCountForWhatTheyStandForAndKeepWhatWasSeen) {
  joiner.OnName(42, 1, "gemm");
  joiner.OnLaunch(42, 1, Launch("A"), 1);
  joiner.OnLaunch(42, 2, Launch("B"), 1);
  auto weighted = [&](uint32_t corr, uint64_t nanos, uint16_t weight) {
    gf_kernel_record r = Rec(corr, 1, nanos);
    r.weight = weight;
    return r;
  };
  // Joined: A's kernel seen once, one period in ten. Unsampled: 3 records,
  // one period in ten, charged 1:1 to A and B; one old-style record (0).
  std::vector<gf_kernel_record> recs = {weighted(1, 100, 10), weighted(2, 100, 10), weighted(5, 1000, 10),
                                        weighted(6, 1000, 10), weighted(7, 1000, 10), weighted(8, 7, 0)};
  joiner.OnRecords(42, recs, 2);
  joiner.Flush(3);
  auto t = Totals();
  EXPECT_EQ(t["A;gemm"].nanos + t["B;gemm"].nanos, 10 * (100 + 100 + 3000) + 7);
  EXPECT_EQ(t["A;gemm"].count + t["B;gemm"].count, 10 * 5 + 1);
  EXPECT_EQ(t["A;gemm"].observed_nanos + t["B;gemm"].observed_nanos, 100 + 100 + 3000 + 7);
  EXPECT_EQ(t["A;gemm"].nanos, 1000 + 15004) << "its own, and half the pool (largest remainder)";
  EXPECT_EQ(joiner.stats().weighted_records, 5u);
  EXPECT_EQ(joiner.stats().estimated_records, 51u);
  // A weight past the contract's limit is clamped, never trusted.
  joiner.OnRecords(42, std::vector<gf_kernel_record>{weighted(1, 1, 65535)}, 4);
  EXPECT_EQ(joiner.stats().estimated_records, 51u + GF_KERNEL_WEIGHT_MAX);
}

TEST_F(KernelJoinerTest, ImplausibleDurationsAreClampedAndCounted) {
  // Activity records come from inside the workload: a duration near 2^64
  // must not overflow the sums (found by tests/fuzz).
  joiner.OnName(42, 1, "k");
  std::vector<gf_kernel_record> recs = {Rec(1, 1, ~0ull - 2000), Rec(2, 1, ~0ull - 2000), Rec(3, 1, 10)};
  joiner.OnRecords(42, recs, 2);
  joiner.Flush(3);
  auto t = Totals();
  EXPECT_EQ(t["[launch stack not sampled];k"].nanos, 2 * profiler::kMaxKernelNs + 10);
  EXPECT_EQ(joiner.stats().implausible_durations, 2u);
}

TEST_F(KernelJoinerTest, LaunchesExpireAndProcessesAreForgotten) {
  joiner.OnLaunch(42, 1, Launch("A"), 0);
  joiner.OnLaunch(43, 1, Launch("B"), profiler::KernelJoiner::kLaunchTtlNs);
  joiner.Flush(profiler::KernelJoiner::kLaunchTtlNs + 1);
  EXPECT_EQ(joiner.pending_launches(), 1u);
  EXPECT_EQ(joiner.stats().expired_launches, 1u);
  joiner.ForgetProcess(43);
  EXPECT_EQ(joiner.pending_launches(), 0u);
  // A record whose name was never announced still counts, under an ID
  // (at the end of a recording: it waited for its name till then).
  std::vector<gf_kernel_record> recs = {Rec(5, 77, 10)};
  joiner.OnRecords(42, recs, 1);
  joiner.Flush(2, /*everything=*/true);
  EXPECT_EQ(Totals()["[launch stack not sampled];[kernel 77]"].nanos, 10);
  EXPECT_EQ(joiner.stats().unknown_names, 1u);
}

// The knobs tests/gpu/run_kernel_breakdown.sh turns: each read as written,
// anything malformed leaves the shipped default and is said.
std::map<std::string, std::string> tuning_env;
const char* TuningEnv(const char* name) {
  auto it = tuning_env.find(name);
  return it == tuning_env.end() ? nullptr : it->second.c_str();
}

TEST(ActivityTuningTest, DefaultsAreTheGpusWorkWithCuptisOwnAttributes) {
  tuning_env = {};
  const cupti::ActivityTuning t = cupti::TuningFromEnv(TuningEnv);
  EXPECT_EQ(t.Kinds(), (std::vector<CUpti_ActivityKind>{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                       CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET}));
  EXPECT_EQ(t.buffer_bytes, 1u << 20);
  EXPECT_EQ(t.pinned, -1);
  EXPECT_EQ(t.per_thread, -1);
  EXPECT_EQ(t.device_buffer_bytes, 0u);
  EXPECT_EQ(t.Describe(), "defaults");
  EXPECT_TRUE(t.error.empty());
}

TEST(ActivityTuningTest, EachKnobIsReadAndDescribed) {
  tuning_env = {{"GPUFLAME_CUPTI_KINDS", "kernel,sync"},     {"GPUFLAME_CUPTI_BUFFER_KB", "8192"},
                {"GPUFLAME_CUPTI_DEVICE_BUFFER_MB", "32"},   {"GPUFLAME_CUPTI_PINNED", "1"},
                {"GPUFLAME_CUPTI_PER_THREAD", "0"},          {"GPUFLAME_CUPTI_ZEROED", "1"},
                {"GPUFLAME_CUPTI_FLUSH_PERIOD_MS", "250"}};
  const cupti::ActivityTuning t = cupti::TuningFromEnv(TuningEnv);
  EXPECT_EQ(t.Kinds(), (std::vector<CUpti_ActivityKind>{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                       CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}));
  EXPECT_EQ(t.buffer_bytes, 8192u << 10);
  EXPECT_EQ(t.device_buffer_bytes, 32u << 20);
  EXPECT_EQ(t.pinned, 1);
  EXPECT_EQ(t.per_thread, 0);
  EXPECT_TRUE(t.zeroed_buffers);
  EXPECT_EQ(t.flush_period_ms, 250u);
  EXPECT_EQ(t.Describe(),
            "kinds kernel+sync, buffers 8192 KiB, zeroed buffers, device buffer 32 MiB, pinned on, "
            "per-thread buffers off, CUPTI flush period 250 ms");
  EXPECT_TRUE(t.error.empty());
}

TEST(ActivityTuningTest, MalformedValuesKeepTheDefaultsAndSaySo) {
  tuning_env = {{"GPUFLAME_CUPTI_KINDS", "kernel,bogus"}, {"GPUFLAME_CUPTI_BUFFER_KB", "-5"},
                {"GPUFLAME_CUPTI_PINNED", "2"}};
  cupti::ActivityTuning t = cupti::TuningFromEnv(TuningEnv);
  EXPECT_EQ(t.kinds, cupti::kDefaultActivityKinds);
  EXPECT_EQ(t.buffer_bytes, 1u << 20);
  EXPECT_EQ(t.pinned, -1);
  EXPECT_NE(t.error.find("bogus"), std::string::npos);
  tuning_env = {{"GPUFLAME_CUPTI_BUFFER_KB", "12abc"}};
  t = cupti::TuningFromEnv(TuningEnv);
  EXPECT_EQ(t.buffer_bytes, 1u << 20);
  EXPECT_NE(t.error.find("GPUFLAME_CUPTI_BUFFER_KB=12abc"), std::string::npos);
  tuning_env = {{"GPUFLAME_CUPTI_KINDS", ","}};  // no kind at all: activity records nothing
  EXPECT_TRUE(cupti::TuningFromEnv(TuningEnv).Kinds().empty());
  tuning_env = {{"GPUFLAME_CUPTI_KINDS", "kernel,memcpy,memset,sync,overhead"}};
  t = cupti::TuningFromEnv(TuningEnv);
  EXPECT_EQ(t.kinds, cupti::kAllActivityKinds);
  EXPECT_EQ(t.Describe(), "kinds kernel+memcpy+memset+sync+overhead");
}

}  // namespace
}  // namespace gpuflame
