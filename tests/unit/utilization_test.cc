// Why the GPU idles (profiler/utilization): the busy union of a device's
// work, idle gaps and pauses, windows, the start-up rule, the three-step
// verdict, and the join of idle gaps with CPU samples (gpu_idle).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "profiler/utilization/busy_lane.h"
#include "profiler/utilization/duration_histogram.h"
#include "profiler/utilization/idle_profile.h"
#include "profiler/utilization/lane_uuids.h"
#include "profiler/utilization/report.h"
#include "profiler/utilization/utilization.h"

namespace gpuflame::profiler::utilization {
namespace {

constexpr uint64_t kUs = 1000, kMs = 1000 * kUs, kS = 1000 * kMs;
constexpr uint64_t T0 = 1'000 * kS;  // CUPTI's clock: any origin

gf_kernel_record Kernel(uint64_t start, uint64_t ns, uint32_t device = 0) {
  gf_kernel_record r{};
  r.start_ns = start;
  r.end_ns = start + ns;
  r.kind = GF_GPU_KERNEL;
  r.device = device;
  r.weight = 1;
  return r;
}

gf_kernel_record Copy(uint64_t start, uint64_t ns, uint64_t bytes, uint8_t cupti_kind) {
  gf_kernel_record r = Kernel(start, ns);
  r.kind = GF_GPU_MEMCPY;
  r.copy_kind = cupti_kind;
  r.bytes = bytes;
  return r;
}

gf_kernel_record Sync(uint64_t start, uint64_t ns, uint8_t kind = GF_SYNC_STREAM) {
  gf_kernel_record r = Kernel(start, ns, GF_DEVICE_UNKNOWN);
  r.kind = GF_GPU_SYNC;
  r.copy_kind = kind;
  return r;
}

TEST(DurationHistogramTest, QuantilesWithinABucketAndExactCountSumMax) {
  DurationHistogram h;
  for (uint64_t i = 1; i <= 1000; i++) h.Add(i * kUs);  // 1 us .. 1 ms
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_EQ(h.sum_ns(), 500500 * kUs);
  EXPECT_EQ(h.max_ns(), 1000 * kUs);
  for (double q : {0.5, 0.95, 0.99}) {
    const double want = q * 1000 * kUs, got = static_cast<double>(h.Quantile(q));
    EXPECT_NEAR(got, want, want / 32 + kUs) << q;
  }
  EXPECT_EQ(h.Quantile(1.0), 1000 * kUs);  // never past the largest value
  DurationHistogram empty;
  EXPECT_EQ(empty.Quantile(0.5), 0u);
  // Bucket bounds tile the line.
  for (int i = 0; i + 1 < DurationHistogram::kBuckets; i++) {
    ASSERT_LT(DurationHistogram::Lower(i), DurationHistogram::Lower(i + 1)) << i;
    ASSERT_EQ(DurationHistogram::Index(DurationHistogram::Lower(i)), i) << i;
  }
  EXPECT_EQ(DurationHistogram::Index(UINT64_MAX), DurationHistogram::kBuckets - 1);
}

TEST(BusyLaneTest, OverlappingWorkOnStreamsCountsOnceAndGapsSplitByTheThreshold) {
  LaneOptions o;
  BusyLane lane(o);
  // Two streams overlapping: [0, 10) and [5, 12) ms are 12 ms busy; a 3 ms
  // gap (under 5 ms), then [15, 20); a 30 ms idle gap; then [50, 60).
  for (auto r : {Kernel(T0 + 5 * kMs, 7 * kMs), Kernel(T0, 10 * kMs), Kernel(T0 + 50 * kMs, 10 * kMs),
                 Kernel(T0 + 15 * kMs, 5 * kMs)})
    lane.Add(r);
  lane.Settle(true);
  const PartStats w = lane.Whole();
  EXPECT_EQ(w.busy_ns, 27 * kMs);
  EXPECT_EQ(w.span_ns(), 60 * kMs);
  EXPECT_EQ(w.gaps, 1u);
  EXPECT_EQ(w.gap_ns, 30 * kMs);
  EXPECT_EQ(w.short_gap_ns, 3 * kMs);
  EXPECT_EQ(w.busy_ns + w.gap_ns + w.short_gap_ns, w.span_ns());
  EXPECT_EQ(w.kernels, 4u);
  ASSERT_EQ(lane.gaps().size(), 1u);
  EXPECT_EQ(lane.gaps()[0].start_ns, T0 + 20 * kMs);
  EXPECT_EQ(lane.gaps()[0].end_ns, T0 + 50 * kMs);
  EXPECT_EQ(lane.counts().late_records, 0u);
}

TEST(BusyLaneTest, RecordsWaitForLaterOnesAndOneTooLateIsCountedNotMerged) {
  LaneOptions o;
  o.reorder_ns = 100 * kMs;
  BusyLane lane(o);
  lane.Add(Kernel(T0, kMs));
  lane.Add(Kernel(T0 + 50 * kMs, kMs));
  lane.Settle(false);  // nothing is 100 ms behind the newest start yet
  EXPECT_TRUE(lane.parts().empty());
  lane.Add(Kernel(T0 + 20 * kMs, kMs));  // out of order, within the horizon: merged in its place
  lane.Add(Kernel(T0 + 300 * kMs, kMs));
  lane.Settle(false);
  lane.Add(Kernel(T0 + 10 * kMs, kMs));  // its place is gone
  lane.Settle(true);
  EXPECT_EQ(lane.counts().late_records, 1u);
  EXPECT_EQ(lane.counts().late_ns, kMs);
  const PartStats w = lane.Whole();
  EXPECT_EQ(w.busy_ns, 4 * kMs);  // the late one left out
  EXPECT_EQ(w.kernels, 5u);       // but still a kernel that ran
  EXPECT_EQ(lane.gaps().size(), 3u);
}

TEST(BusyLaneTest, CopiesByDirectionWithBytesAndWindowsSplitWork) {
  LaneOptions o;
  o.window_ns = 10 * kMs;
  BusyLane lane(o);
  lane.Add(Copy(T0, 4 * kMs, 64 << 20, 1));
  lane.Add(Copy(T0 + 4 * kMs, kMs, 1 << 20, 2));
  lane.Add(Kernel(T0 + 8 * kMs, 4 * kMs));  // across the first window's end
  lane.Settle(true);
  const PartStats w = lane.Whole();
  EXPECT_EQ(w.copies[kHtoD].count, 1u);
  EXPECT_EQ(w.copies[kHtoD].bytes, uint64_t{64} << 20);
  EXPECT_EQ(w.copies[kHtoD].ns, 4 * kMs);
  EXPECT_EQ(w.copies[kDtoH].bytes, uint64_t{1} << 20);
  EXPECT_EQ(w.kernels, 1u);
  ASSERT_EQ(lane.windows().size(), 2u);
  EXPECT_EQ(lane.windows()[0].busy_ns, 5 * kMs + 2 * kMs);
  EXPECT_EQ(lane.windows()[1].busy_ns, 2 * kMs);
  EXPECT_EQ(lane.windows()[0].kernels, 1u);
}

TEST(BusyLaneTest, FullWindowsCoarsenTwoIntoOneAndKeepTheirSums) {
  LaneOptions o;
  o.window_ns = kMs;
  o.max_windows = 8;
  BusyLane lane(o);
  for (uint64_t i = 0; i < 40; i++) lane.Add(Kernel(T0 + i * kMs, kMs / 2));
  lane.Settle(true);
  EXPECT_LE(lane.windows().size(), 8u);
  EXPECT_EQ(lane.window_ns(), 8 * kMs);
  uint64_t busy = 0, kernels = 0;
  for (const Window& w : lane.windows()) {
    busy += w.busy_ns;
    kernels += w.kernels;
  }
  EXPECT_EQ(busy, 40 * kMs / 2);
  EXPECT_EQ(kernels, 40u);
  EXPECT_EQ(busy, lane.Whole().busy_ns);
}

// A busy loop of 500 us kernels every |period| from |start| for |n| kernels.
void Loop(BusyLane& lane, uint64_t start, uint64_t period, int n, uint64_t ns = 500 * kUs) {
  for (int i = 0; i < n; i++) lane.Add(Kernel(start + static_cast<uint64_t>(i) * period, ns));
}

TEST(ReportTest, AStartUpBeforeAPauseIsSetApartAndTheLoopIsJudgedAlone) {
  BusyLane lane{LaneOptions{}};
  // Weights copied, then 3 s compiling with nothing for the GPU, then 2 s of
  // back-to-back kernels.
  lane.Add(Copy(T0, 10 * kMs, 256 << 20, 1));
  Loop(lane, T0 + 3 * kS, 500 * kUs, 4000);
  lane.Settle(true);
  LaneReport r = SteadyState(1, 0, lane);
  Judge(r, 0);
  EXPECT_EQ(r.pauses, 1u);
  EXPECT_EQ(r.start_up_pauses, 1u);
  EXPECT_EQ(r.start_up_ns, 3 * kS);
  EXPECT_EQ(r.steady.span_ns(), 2 * kS);
  EXPECT_EQ(r.steady.busy_ns, 2 * kS);
  EXPECT_EQ(r.steady.gap_ns, 0u);
  EXPECT_EQ(r.verdict, Verdict::kBusy) << r.reason;
  // The whole run still says what happened.
  EXPECT_GT(Ratio(r.whole.gap_ns, r.whole.span_ns()), 0.5);
}

TEST(ReportTest, PausesThatRecurWithTheWorkStayInTheSteadyState) {
  BusyLane lane{LaneOptions{}};
  // 1 s of work, a 2 s stall, 1 s of work, a 2 s stall, 1 s of work.
  for (int k = 0; k < 3; k++) Loop(lane, T0 + static_cast<uint64_t>(k) * 3 * kS, 500 * kUs, 2000);
  lane.Settle(true);
  LaneReport r = SteadyState(1, 0, lane);
  Judge(r, 0);
  EXPECT_EQ(r.start_up_ns, 0u);
  EXPECT_EQ(r.steady.gap_ns, 4 * kS);
  EXPECT_EQ(r.verdict, Verdict::kSupply) << r.reason;
  EXPECT_NE(r.reason.find("0.0% of the idle time a thread waited in a synchronise call"), std::string::npos)
      << r.reason;
}

// A stretch with copies only, the GPU mostly idle in gaps under the
// threshold: not busy, not starved by the gap rule, not launch bound
// without kernels: not judged, and the reason says so.
TEST(ReportTest, CopiesAloneWithTheGpuMostlyIdleAreNotJudgedBusy) {
  BusyLane lane{LaneOptions{}};
  for (int i = 0; i < 250; i++) lane.Add(Copy(T0 + static_cast<uint64_t>(i) * 2 * kMs, 100 * kUs, 1 << 20, 1));
  lane.Settle(true);
  LaneReport r = SteadyState(1, 0, lane);
  Judge(r, 0);
  EXPECT_EQ(r.steady.kernels, 0u);
  EXPECT_LT(Ratio(r.steady.busy_ns, r.steady.span_ns()), kLaunchBoundBusy);
  EXPECT_EQ(r.verdict, Verdict::kNotJudged) << r.reason;
  EXPECT_NE(r.reason.find("ran no kernel in it"), std::string::npos) << r.reason;
}

TEST(ReportTest, TheThreeSteps) {
  struct Case {
    const char* what;
    uint64_t period, ns;
    Verdict want;
  };
  for (const Case& c : {Case{"starved: 20 ms gaps after 5 ms of work", 25 * kMs, 5 * kMs, Verdict::kSupply},
                        Case{"launch-bound: 4 us kernels 2 us apart", 6 * kUs, 4 * kUs, Verdict::kLaunchBound},
                        Case{"busy: back to back", 500 * kUs, 500 * kUs, Verdict::kBusy}}) {
    BusyLane lane{LaneOptions{}};
    Loop(lane, T0, c.period, static_cast<int>(kS / c.period), c.ns);
    lane.Settle(true);
    LaneReport r = SteadyState(1, 0, lane);
    Judge(r, 0);
    EXPECT_EQ(r.verdict, c.want) << c.what << ": " << r.reason;
  }
  // A few slow kernels among many: P95 over ten times P50.
  BusyLane lane{LaneOptions{}};
  uint64_t t = T0;
  for (int i = 0; i < 2000; i++) {
    const uint64_t ns = i % 10 == 0 ? 5 * kMs : 100 * kUs;
    lane.Add(Kernel(t, ns));
    t += ns;
  }
  lane.Settle(true);
  LaneReport r = SteadyState(1, 0, lane);
  Judge(r, 0);
  EXPECT_EQ(r.verdict, Verdict::kSlowKernels) << r.reason;
  // Duty-cycled activity, or too short a run: not judged, and said why.
  BusyLane weighted{LaneOptions{}};
  gf_kernel_record k = Kernel(T0, kS);
  k.weight = 10;
  weighted.Add(k);
  weighted.Settle(true);
  LaneReport w = SteadyState(1, 0, weighted);
  Judge(w, 0);
  EXPECT_EQ(w.verdict, Verdict::kNotJudged);
  EXPECT_NE(w.reason.find("duty-cycled"), std::string::npos);
  BusyLane brief{LaneOptions{}};
  brief.Add(Kernel(T0, 10 * kMs));
  brief.Settle(true);
  LaneReport b = SteadyState(1, 0, brief);
  Judge(b, 0);
  EXPECT_EQ(b.verdict, Verdict::kNotJudged);
}

TEST(UtilizationTest, IdleTimeIsSharedAmongTheSamplesInEachGapAndSumsToIt) {
  Utilization u{UtilizationOptions{}};
  constexpr pid_t kPid = 7;
  // CUPTI's clock is the monotonic one here, exactly.
  u.OnClock(kPid, T0, T0, T0);
  u.OnClock(kPid, T0 + 10 * kS, T0 + 10 * kS, T0 + 10 * kS);
  std::vector<gf_kernel_record> work = {Kernel(T0, 10 * kMs), Kernel(T0 + 40 * kMs, 10 * kMs),
                                        Kernel(T0 + 80 * kMs, 10 * kMs), Sync(T0 + 50 * kMs, 10 * kMs)};
  u.OnGpuRecords(kPid, work);
  // Gap 1 [10, 40) ms: three samples, of stacks 1, 1 and 2. Gap 2 [50, 80):
  // none. A sample outside any gap and one of another process count nowhere.
  u.OnCpuSample(kPid, T0 + 12 * kMs, 1);
  u.OnCpuSample(kPid, T0 + 22 * kMs, 2);
  u.OnCpuSample(kPid, T0 + 32 * kMs, 1);
  u.OnCpuSample(kPid, T0 + 45 * kMs, 3);
  u.OnCpuSample(kPid + 1, T0 + 60 * kMs, 4);
  u.Finish();
  ASSERT_EQ(u.lanes().size(), 1u);  // the sync record is no lane's work
  EXPECT_EQ(u.syncs().at(kPid).calls, 1u);
  EXPECT_EQ(u.syncs().at(kPid).stream_ns, 10 * kMs);
  IdleJoin j = u.JoinIdle({});
  EXPECT_EQ(j.gaps, 2u);
  EXPECT_EQ(j.gaps_without_sample, 1u);
  EXPECT_EQ((j.ns[{kPid, 0, 1, false}]), 20 * kMs);
  EXPECT_EQ((j.ns[{kPid, 0, 2, false}]), 10 * kMs);
  EXPECT_EQ((j.ns[{kPid, 0, StackTable::kNone, false}]), 30 * kMs);
  uint64_t total = 0;
  for (const auto& [charge, ns] : j.ns) total += ns;
  EXPECT_EQ(total, 60 * kMs);                           // the idle time itself
  EXPECT_EQ((j.sync_in_gaps_ns[{kPid, 0}]), 10 * kMs);  // [50, 60) of gap 2
  // Gaps before the steady state are marked start-up.
  IdleJoin s = u.JoinIdle({{{kPid, 0}, T0 + 50 * kMs}});
  EXPECT_EQ((s.ns[{kPid, 0, 1, true}]), 20 * kMs);
  EXPECT_EQ((s.ns[{kPid, 0, StackTable::kNone, false}]), 30 * kMs);
}

TEST(UtilizationTest, AProcessWithoutClockPairsIsCountedNotJoined) {
  Utilization u{UtilizationOptions{}};
  std::vector<gf_kernel_record> work = {Kernel(T0, kMs), Kernel(T0 + 20 * kMs, kMs)};
  u.OnGpuRecords(3, work);
  u.OnCpuSample(3, T0 + 10 * kMs, 1);
  u.Finish();
  IdleJoin j = u.JoinIdle({});
  EXPECT_EQ(j.gaps_unaligned, 1u);
  EXPECT_EQ(j.unaligned_ns, 19 * kMs);
  EXPECT_TRUE(j.ns.empty());
}

// The probes' waits (GF_EV_CUDA_SYNC) are on CLOCK_MONOTONIC; the gaps on
// CUPTI's. Here CUPTI's clock runs 5 s ahead of the monotonic one.
TEST(UtilizationTest, ProbeWaitsAreConvertedToCuptisClockAndJoinedWithTheGaps) {
  Utilization u{UtilizationOptions{}};
  constexpr pid_t kPid = 7;
  constexpr uint64_t kAhead = 5 * kS, M0 = T0 - kAhead;  // M0: T0 on the monotonic clock
  u.OnClock(kPid, T0, M0, M0);
  u.OnClock(kPid, T0 + 10 * kS, M0 + 10 * kS, M0 + 10 * kS);
  std::vector<gf_kernel_record> work = {Kernel(T0, 10 * kMs), Kernel(T0 + 40 * kMs, 10 * kMs)};
  u.OnGpuRecords(kPid, work);
  // A stream wait [20, 30) ms and a device wait [35, 45) ms: 15 ms of the
  // gap [10, 40) in all (the second half outside it), from two stacks.
  u.OnSyncCall(kPid, GF_API_CUDA_STREAM_SYNC, M0 + 20 * kMs, M0 + 30 * kMs, 11);
  u.OnSyncCall(kPid, GF_API_CU_CTX_SYNC, M0 + 35 * kMs, M0 + 45 * kMs, 12);
  u.OnSyncCall(kPid, GF_API_CUDA_EVENT_SYNC, M0 + 60 * kMs, M0 + 61 * kMs, 11);
  u.Finish();
  const SyncStats& s = u.syncs().at(kPid);
  EXPECT_TRUE(s.from_probes);
  EXPECT_EQ(s.calls, 3u);
  EXPECT_EQ(s.ns, 21 * kMs);
  EXPECT_EQ(s.stream_ns, 10 * kMs);
  EXPECT_EQ(s.context_ns, 10 * kMs);
  EXPECT_EQ(s.event_ns, 1 * kMs);
  EXPECT_EQ(s.not_aligned, 0u);
  EXPECT_EQ((u.sync_stacks().at({kPid, 11})), 11 * kMs);
  EXPECT_EQ((u.sync_stacks().at({kPid, 12})), 10 * kMs);
  IdleJoin j = u.JoinIdle({});
  EXPECT_EQ((j.sync_in_gaps_ns[{kPid, 0}]), 15 * kMs);
}

TEST(UtilizationTest, ProbeWaitsOfAProcessWithoutClockPairsAreSummedAndCountedNotJoined) {
  Utilization u{UtilizationOptions{}};
  std::vector<gf_kernel_record> work = {Kernel(T0, kMs), Kernel(T0 + 20 * kMs, kMs)};
  u.OnGpuRecords(3, work);
  u.OnSyncCall(3, GF_API_CUDA_STREAM_SYNC, 5 * kMs, 15 * kMs, 1);
  u.Finish();
  EXPECT_EQ(u.syncs().at(3).calls, 1u);
  EXPECT_EQ(u.syncs().at(3).ns, 10 * kMs);
  EXPECT_EQ(u.syncs().at(3).not_aligned, 1u);
  IdleJoin j = u.JoinIdle({});
  EXPECT_EQ((j.sync_in_gaps_ns[{3, 0}]), 0u);
}

// CUPTI's SYNCHRONIZATION records (record --sync-waits) and the probes say
// the same waits: the probes are counted, CUPTI's ignored and said so; a
// process only CUPTI reported keeps CUPTI's.
TEST(UtilizationTest, CuptisSyncRecordsAndTheProbesTogetherCountEachWaitOnce) {
  Utilization u{UtilizationOptions{}};
  u.OnClock(7, T0, T0, T0);
  u.OnClock(8, T0, T0, T0);
  std::vector<gf_kernel_record> work = {Kernel(T0, 10 * kMs), Kernel(T0 + 40 * kMs, 10 * kMs),
                                        Sync(T0 + 20 * kMs, 10 * kMs)};
  u.OnGpuRecords(7, work);
  u.OnGpuRecords(8, work);
  // Process 7: the probes' record of the same wait, before or after CUPTI's.
  u.OnSyncCall(7, GF_API_CUDA_STREAM_SYNC, T0 + 20 * kMs, T0 + 30 * kMs, 1);
  std::vector<gf_kernel_record> late = {Sync(T0 + 20 * kMs, 10 * kMs)};
  u.OnGpuRecords(7, late);
  u.Finish();
  const SyncStats& p = u.syncs().at(7);
  EXPECT_TRUE(p.from_probes);
  EXPECT_EQ(p.calls, 1u);
  EXPECT_EQ(p.ns, 10 * kMs);
  EXPECT_EQ(p.cupti_ignored, 2u);
  const SyncStats& c = u.syncs().at(8);
  EXPECT_FALSE(c.from_probes);
  EXPECT_EQ(c.calls, 1u);
  EXPECT_EQ(c.ns, 10 * kMs);
  IdleJoin j = u.JoinIdle({});
  EXPECT_EQ((j.sync_in_gaps_ns[{7, 0}]), 10 * kMs);
  EXPECT_EQ((j.sync_in_gaps_ns[{8, 0}]), 10 * kMs);
}

TEST(UtilizationTest, SyncStacksAreBounded) {
  UtilizationOptions o;
  o.max_sync_stacks = 1;
  Utilization u(o);
  u.OnSyncCall(1, GF_API_CUDA_DEVICE_SYNC, kMs, 2 * kMs, 1);
  u.OnSyncCall(1, GF_API_CUDA_DEVICE_SYNC, 3 * kMs, 4 * kMs, 2);
  u.OnSyncCall(1, GF_API_CUDA_DEVICE_SYNC, 5 * kMs, 6 * kMs, 1);
  u.Finish();
  EXPECT_EQ(u.syncs().at(1).calls, 3u);  // every wait in the sums
  EXPECT_EQ((u.sync_stacks().at({1, 1})), 2 * kMs);
  EXPECT_EQ(u.sync_stacks_dropped(), 1u);
}

TEST(UtilizationTest, LanesArePerProcessAndDeviceAndBounded) {
  UtilizationOptions o;
  o.max_lanes = 2;
  Utilization u(o);
  std::vector<gf_kernel_record> a = {Kernel(T0, kMs, 0), Kernel(T0, kMs, 1), Kernel(T0, kMs, 2)};
  u.OnGpuRecords(1, a);
  u.Finish();
  EXPECT_EQ(u.lanes().size(), 2u);
  EXPECT_EQ(u.lanes_dropped(), 1u);
}

TEST(IdleProfileTest, MarkerForGapsWithoutSamplesAndLabelsForGpuAndPhase) {
  StackTable stacks;
  FrameTable frames;
  IdleJoin j;
  j.ns[{5, 1, StackTable::kNone, true}] = 7 * kMs;
  j.ns[{5, 1, StackTable::kNone, false}] = 3 * kMs;
  Profile p = BuildIdleProfile({stacks, frames}, j, {{5, "python3"}}, 0, 0);
  EXPECT_EQ(p.name, "gpu_idle");
  ASSERT_EQ(p.samples.size(), 2u);
  // Sorted steady first; the start-up's gap under a root of its own.
  const Sample &steady = p.samples[0], &start_up = p.samples[1];
  EXPECT_EQ(steady.values, std::vector<int64_t>{static_cast<int64_t>(3 * kMs)});
  ASSERT_EQ(steady.frames.size(), 1u);
  EXPECT_EQ(p.frames[steady.frames[0]].name, kNoThreadOnCpuFrame);
  EXPECT_EQ(start_up.values, std::vector<int64_t>{static_cast<int64_t>(7 * kMs)});
  ASSERT_EQ(start_up.frames.size(), 2u);
  EXPECT_EQ(p.frames[start_up.frames[0]].name, kStartUpFrame);
  EXPECT_EQ(start_up.frames[1], steady.frames[0]) << "one marker frame, shared";
  std::map<std::string, std::string> labels;
  for (const Label& l : start_up.labels) labels[l.key] = l.str.empty() ? std::to_string(l.num) : l.str;
  EXPECT_EQ(labels["pid"], "5");
  EXPECT_EQ(labels["process"], "python3");
  EXPECT_EQ(labels["gpu"], "1");
  EXPECT_EQ(labels["phase"], "start-up");
}


// The agent's windowed judging (windowed_lane.h): busy and idle only inside
// the library's on-spans.
gf_kernel_record OnSpan(uint64_t start, uint64_t end, uint16_t weight = 10) {
  gf_kernel_record r{};
  r.start_ns = start;
  r.end_ns = end;
  r.kind = GF_GPU_ACTIVITY_WINDOW;
  r.device = GF_DEVICE_UNKNOWN;
  r.weight = weight;
  return r;
}

UtilizationOptions Windowed() {
  UtilizationOptions o;
  o.windowed = true;
  return o;
}

std::vector<JudgedLane> JudgeAll(Utilization& u, IdleJoin& join, bool ended = false) {
  return u.JudgeWindows([ended](pid_t) { return ended; }, join);
}

// A GF_GPU_DEVICE record: ordinal |device| is the GPU of UUID bytes 5eed... |last|.
gf_kernel_record DeviceOf(uint32_t device, uint8_t last) {
  const unsigned char uuid[16] = {0x5e, 0xed, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, last};
  gf_kernel_record r{};
  r.kind = GF_GPU_DEVICE;
  r.device = device;
  std::memcpy(&r.start_ns, uuid, 8);
  std::memcpy(&r.end_ns, uuid + 8, 8);
  return r;
}

TEST(LaneUuidsTest, ADeviceRecordIsNvmlsTextOfTheSameBytesAndIsNeverWork) {
  EXPECT_EQ(GpuUuidText(DeviceOf(0, 0xa7)), "GPU-5eed0000-0000-4000-8000-0000000000a7");
  for (bool windowed : {false, true}) {
    UtilizationOptions o;
    o.windowed = windowed;
    Utilization u{o};
    // Ordinal 1 is the GPU ending in 01, ordinal 0 the one ending in 02;
    // said again at a later flush (the same), and by another process.
    std::vector<gf_kernel_record> r = {OnSpan(T0, T0 + 100 * kMs), DeviceOf(1, 1), DeviceOf(0, 2), Kernel(T0, kMs, 1),
                                       DeviceOf(1, 1)};
    u.OnGpuRecords(5, r);
    u.OnGpuRecords(6, std::vector<gf_kernel_record>{DeviceOf(0, 3)});
    EXPECT_EQ(u.uuids().Of(5, 1), "GPU-5eed0000-0000-4000-8000-000000000001");
    EXPECT_EQ(u.uuids().Of(5, 0), "GPU-5eed0000-0000-4000-8000-000000000002");
    EXPECT_EQ(u.uuids().Of(6, 0), "GPU-5eed0000-0000-4000-8000-000000000003");
    EXPECT_EQ(u.uuids().Of(6, 1), "");
    if (!windowed) {
      u.Finish();
      ASSERT_EQ(u.lanes().size(), 1u) << "device records make no lane";
      EXPECT_EQ(u.lanes().begin()->first, (std::pair<pid_t, uint32_t>{5, 1}));
      continue;
    }
    IdleJoin join;
    std::vector<JudgedLane> judged = u.JudgeWindows([](pid_t pid) { return pid == 5; }, join);
    ASSERT_EQ(judged.size(), 1u) << "device records make no lane";
    EXPECT_EQ(judged[0].device, 1u);
    EXPECT_EQ(judged[0].uuid, "GPU-5eed0000-0000-4000-8000-000000000001");
    EXPECT_EQ(judged[0].judgement.figures.kernels, 1u);
    // An ended process's UUIDs go with its lanes; the live one's stay.
    EXPECT_EQ(u.uuids().Of(5, 1), "");
    EXPECT_EQ(u.uuids().Of(6, 0), "GPU-5eed0000-0000-4000-8000-000000000003");
  }
}

TEST(LaneUuidsTest, BoundedAndOrdinalsPastTheLibrarysLimitAreCounted) {
  LaneUuids u;
  u.OnRecord(1, DeviceOf(LaneUuids::kMaxOrdinal, 1));
  EXPECT_EQ(u.dropped(), 1u);
  for (pid_t pid = 1; pid <= static_cast<pid_t>(LaneUuids::kMaxEntries) + 5; pid++) u.OnRecord(pid, DeviceOf(0, 1));
  EXPECT_EQ(u.size(), LaneUuids::kMaxEntries);
  EXPECT_EQ(u.dropped(), 6u);
  u.Forget(1);
  EXPECT_EQ(u.size(), LaneUuids::kMaxEntries - 1);
  EXPECT_EQ(u.Of(1, 0), "");
}

TEST(WindowedLaneTest, JudgedOnlyInsideOnSpansAndAGapAcrossAnOffPeriodIsNotIdle) {
  Utilization u{Windowed()};
  constexpr pid_t kPid = 5;
  // Span 1 [0, 100) ms: work [0, 10), [50, 60), [95, 99): idle gaps of 40 and
  // 35 ms, a 1 ms hole to the span's end. Off [100, 200): nothing, and the
  // 106 ms from the last work to span 2's first is no gap. Span 2 [200, 300):
  // its lead [200, 205) is not judged (work launched before it may run
  // there), work [205, 210), then a 90 ms idle gap to its end. A kernel that
  // starts at 150 ms (launched in span 1, run after it closed) is counted as
  // a kernel, its time neither busy nor idle.
  std::vector<gf_kernel_record> r = {OnSpan(T0, T0 + 100 * kMs),
                                     Kernel(T0, 10 * kMs),
                                     Kernel(T0 + 50 * kMs, 10 * kMs),
                                     Kernel(T0 + 95 * kMs, 4 * kMs),
                                     Kernel(T0 + 150 * kMs, 20 * kMs),
                                     OnSpan(T0 + 200 * kMs, T0 + 300 * kMs),
                                     Kernel(T0 + 205 * kMs, 5 * kMs)};
  u.OnGpuRecords(kPid, r);
  IdleJoin join;
  std::vector<JudgedLane> judged = JudgeAll(u, join, /*ended=*/true);
  ASSERT_EQ(judged.size(), 1u);
  const LaneJudgement& j = judged[0].judgement;
  EXPECT_EQ(j.from_ns, T0);
  EXPECT_EQ(j.to_ns, T0 + 300 * kMs);
  EXPECT_EQ(j.observed_ns, 100 * kMs + 95 * kMs);
  EXPECT_EQ(j.unjudged_ns, 5 * kMs);
  EXPECT_EQ(j.figures.busy_ns, 24 * kMs + 5 * kMs);
  EXPECT_EQ(j.figures.gaps, 3u);
  EXPECT_EQ(j.figures.gap_ns, 40 * kMs + 35 * kMs + 90 * kMs);
  EXPECT_EQ(j.figures.short_gap_ns, 1 * kMs);
  EXPECT_EQ(j.figures.kernels, 5u);
  EXPECT_EQ(judged[0].counts.outside_records, 1u);
  EXPECT_DOUBLE_EQ(j.coverage(), 195.0 / 300.0);
  // busy + idle + short holes = observed: every observed nanosecond judged once.
  EXPECT_EQ(j.figures.busy_ns + j.figures.gap_ns + j.figures.short_gap_ns, j.observed_ns);
  ASSERT_EQ(j.idle_gaps.size(), 3u);
  EXPECT_EQ(j.idle_gaps[2].start_ns, T0 + 210 * kMs);
  EXPECT_EQ(j.idle_gaps[2].end_ns, T0 + 300 * kMs);
  EXPECT_EQ(u.windowed_lanes(), 0u);  // its process ended: forgotten
}

TEST(WindowedLaneTest, WithoutOnSpansNothingIsJudgedBusyOrIdle) {
  // A library that sends no spans (or activity off throughout): the records
  // count as kernels, but no time is observed, so no ratio is claimed.
  Utilization u{Windowed()};
  std::vector<gf_kernel_record> r = {Kernel(T0, 10 * kMs), Kernel(T0 + 50 * kMs, 10 * kMs)};
  u.OnGpuRecords(1, r);
  IdleJoin join;
  std::vector<JudgedLane> judged = JudgeAll(u, join, true);
  ASSERT_EQ(judged.size(), 1u);
  EXPECT_EQ(judged[0].judgement.observed_ns, 0u);
  EXPECT_EQ(judged[0].judgement.figures.gap_ns, 0u);
  EXPECT_EQ(judged[0].judgement.figures.kernels, 2u);
  EXPECT_EQ(judged[0].counts.outside_records, 2u);
}

TEST(WindowedLaneTest, AGapOpenAtAJudgementsEndIsJudgedWholeInTheNextAndLateRecordsAreCounted) {
  Utilization u{Windowed()};
  constexpr pid_t kPid = 9;
  const uint64_t reorder = UtilizationOptions{}.lane.reorder_ns;
  // One long span, repeated as it grows (the library's flushes).
  std::vector<gf_kernel_record> a = {OnSpan(T0, T0 + 5 * kS), Kernel(T0, 1 * kS), Kernel(T0 + 1800 * kMs, 10 * kMs)};
  u.OnGpuRecords(kPid, a);
  IdleJoin join;
  // Settled up to 5 s - the horizon (3 s) = 2 s: the hole from 1.81 s is open.
  std::vector<JudgedLane> first = JudgeAll(u, join);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].judgement.to_ns, T0 + 5 * kS - reorder);
  EXPECT_EQ(first[0].judgement.figures.gaps, 1u);  // [1, 1.8) s
  EXPECT_EQ(first[0].judgement.figures.gap_ns, 800 * kMs);
  std::vector<gf_kernel_record> b = {OnSpan(T0, T0 + 8 * kS), Kernel(T0 + 2500 * kMs, 100 * kMs),
                                     Kernel(T0 + 1900 * kMs, 1 * kMs)};  // late: its stretch was judged
  u.OnGpuRecords(kPid, b);
  std::vector<JudgedLane> second = JudgeAll(u, join);
  ASSERT_EQ(second.size(), 1u);
  const LaneJudgement& j = second[0].judgement;
  EXPECT_EQ(j.from_ns, T0 + 2 * kS);
  // The hole after 2.6 s is open again at 5 s: the next judgement's.
  EXPECT_EQ(j.figures.gaps, 1u);
  ASSERT_EQ(j.idle_gaps.size(), 1u);
  EXPECT_EQ(j.idle_gaps[0].start_ns, T0 + 1810 * kMs);  // begun in the first judgement, judged whole here
  EXPECT_EQ(j.idle_gaps[0].end_ns, T0 + 2500 * kMs);
  EXPECT_EQ(j.observed_ns, 3 * kS);  // [2, 5) s: the span goes on, judged from its start
  EXPECT_EQ(second[0].counts.late_records, 1u);
  EXPECT_EQ(j.figures.kernels, 2u);  // the late one is still a kernel seen
}

TEST(WindowedLaneTest, GapsAreJoinedWithTheCpuSamplesTakenDuringThem) {
  Utilization u{Windowed()};
  constexpr pid_t kPid = 4;
  u.OnClock(kPid, T0, T0, T0);
  u.OnClock(kPid, T0 + kS, T0 + kS, T0 + kS);
  std::vector<gf_kernel_record> r = {OnSpan(T0, T0 + 100 * kMs), Kernel(T0, 10 * kMs), Kernel(T0 + 60 * kMs, 40 * kMs)};
  u.OnGpuRecords(kPid, r);
  u.OnCpuSample(kPid, T0 + 20 * kMs, 7);     // in the gap [10, 60)
  u.OnCpuSample(kPid, T0 + 150 * kMs, 8);    // after the span: nowhere
  u.OnCpuSample(kPid + 1, T0 + 20 * kMs, 9);  // no GPU record of its process: not even kept
  IdleJoin join;
  JudgeAll(u, join, true);
  EXPECT_EQ(join.gaps, 1u);
  EXPECT_EQ((join.ns[{kPid, 0, 7, false}]), 50 * kMs);
  EXPECT_EQ(join.ns.size(), 1u);
}

TEST(WindowedLaneTest, TheJudgedStretchIsPutOnTheMonotonicClockBeforeAnEndedProcessIsForgotten) {
  // The agent joins it to the NVML sampler's readings (CLOCK_MONOTONIC) after
  // JudgeWindows, which forgets an ended process's clock pairs.
  Utilization u{Windowed()};
  constexpr uint64_t M0 = T0 - 5 * kS;  // T0 on the monotonic clock
  u.OnClock(4, T0, M0, M0);
  u.OnClock(4, T0 + kS, M0 + kS, M0 + kS);
  std::vector<gf_kernel_record> r = {OnSpan(T0, T0 + 100 * kMs), Kernel(T0, 10 * kMs)};
  u.OnGpuRecords(4, r);
  u.OnGpuRecords(5, r);  // no clock pair: not put on it
  IdleJoin join;
  std::vector<JudgedLane> judged = JudgeAll(u, join, true);
  ASSERT_EQ(judged.size(), 2u);
  EXPECT_EQ(judged[0].from_mono_ns, M0);
  EXPECT_EQ(judged[0].to_mono_ns, M0 + 100 * kMs);
  EXPECT_FALSE(judged[1].from_mono_ns);
  EXPECT_FALSE(judged[1].to_mono_ns);
  EXPECT_FALSE(u.clock().ToMonotonic(4, T0));  // forgotten
}

TEST(WindowedLaneTest, RecordModeIgnoresOnSpansAndUnknownKinds) {
  // Exact mode (record): the spans change nothing; a kind from a newer
  // library is no lane's work.
  Utilization plain{UtilizationOptions{}}, with{UtilizationOptions{}};
  std::vector<gf_kernel_record> work = {Kernel(T0, 10 * kMs), Kernel(T0 + 40 * kMs, 10 * kMs)};
  plain.OnGpuRecords(1, work);
  gf_kernel_record unknown = Kernel(T0 + 20 * kMs, 5 * kMs);
  unknown.kind = 5;
  work.push_back(OnSpan(T0 + 5 * kMs, T0 + 30 * kMs));
  work.push_back(unknown);
  with.OnGpuRecords(1, work);
  plain.Finish();
  with.Finish();
  const PartStats a = plain.lanes().begin()->second.Whole(), b = with.lanes().begin()->second.Whole();
  EXPECT_EQ(a.busy_ns, b.busy_ns);
  EXPECT_EQ(a.gap_ns, b.gap_ns);
  EXPECT_EQ(b.gap_ns, 30 * kMs);
  EXPECT_EQ(a.kernels, b.kernels);
}

}  // namespace
}  // namespace gpuflame::profiler::utilization
