// The agent's per-window GPU utilisation metrics (agent/gpu_utilization.h):
// valid exposition (one HELP and TYPE per family, its series together), the
// figures of a judgement, the cap on lanes and the retention of ended ones;
// the join of a lane's window to its GPU's NVML figures (JoinLaneDevice) and
// the verdict's step 3 on them.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/gpu_utilization.h"
#include "agent/metrics_server.h"
#include "profiler/utilization/device_figures.h"

namespace gpuflame::profiler {
namespace {

constexpr uint64_t kMs = 1'000'000, kS = 1000 * kMs;

utilization::JudgedLane Lane(pid_t pid, uint32_t device, uint64_t observed, uint64_t busy, uint64_t gap) {
  utilization::JudgedLane l;
  l.pid = pid;
  l.device = device;
  l.judgement.from_ns = kS;
  l.judgement.to_ns = 11 * kS;
  l.judgement.observed_ns = observed;
  l.judgement.figures.end_ns = observed;
  l.judgement.figures.busy_ns = busy;
  l.judgement.figures.gap_ns = gap;
  l.judgement.figures.gaps = 3;
  for (int i = 0; i < 10; i++) {
    l.judgement.figures.kernels++;
    l.judgement.figures.kernel_durations.Add(i < 9 ? 100'000 : 5 * kMs);
  }
  l.judgement.figures.copies[utilization::kHtoD].bytes = 4096;
  l.judgement.sync_ns = 7 * kMs;
  return l;
}

GpuUtilizationMetrics::PodOf Pods(const PodInfo* pod) {
  return [pod](pid_t) { return pod; };
}
GpuUtilizationMetrics::DeviceOf NoGpu() {
  return [](const utilization::JudgedLane&) {
    LaneDevice d;
    d.not_joined = "no_nvml";
    return d;
  };
}

// The families in order of appearance, checked for one HELP and TYPE each,
// before their series, which are adjacent; and every sample line's value.
std::map<std::string, double> CheckExposition(const std::string& text) {
  std::map<std::string, double> series;  // "name{labels}" -> value
  std::set<std::string> helped, typed, finished;
  std::string current;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helped.insert(name).second) << "second HELP for " << name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(typed.insert(name).second) << "second TYPE for " << name;
      continue;
    }
    if (line.empty()) continue;
    const size_t end = line.find_first_of("{ ");
    const std::string name = line.substr(0, end);
    if (name != current) {
      EXPECT_FALSE(finished.contains(name)) << name << "'s series are not together";
      if (!current.empty()) finished.insert(current);
      current = name;
    }
    EXPECT_TRUE(helped.contains(name) && typed.contains(name)) << name << " has no HELP or TYPE before it";
    const size_t space = line.rfind(' ');
    series[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return series;
}

TEST(GpuUtilizationMetricsTest, AJudgementsFiguresAsValidExposition) {
  GpuUtilizationMetrics m;
  PodInfo pod;
  pod.pod_uid = "u-1";
  pod.pod = "trainer-0";
  pod.namespace_name = "ml";
  pod.container = "main";
  // 1 s observed of a 10 s window: 600 ms busy, 250 ms in idle gaps.
  m.Update(
      {Lane(42, 0, 1 * kS, 600 * kMs, 250 * kMs)}, Pods(&pod),
      [](const utilization::JudgedLane&) {
        GpuIdentity g;
        g.index = 3;
        g.uuid = "GPU-abc";
        LaneDevice d;
        d.gpu = g;
        d.not_joined = "no_readings";
        return d;
      },
      1);
  const std::string text = PrometheusText(m.Metrics("node-a"));
  std::map<std::string, double> s = CheckExposition(text);
  const std::string l =
      "{node=\"node-a\",pid=\"42\",device=\"0\",gpu=\"3\",uuid=\"GPU-abc\",namespace=\"ml\",pod=\"trainer-0\","
      "container=\"main\"}";
  EXPECT_NEAR(s["gpuflame_gpu_lane_busy_ratio" + l], 0.6, 1e-9) << text;
  EXPECT_NEAR(s["gpuflame_gpu_lane_idle_gap_ratio" + l], 0.25, 1e-9);
  EXPECT_NEAR(s["gpuflame_gpu_lane_coverage_ratio" + l], 0.1, 1e-9);
  EXPECT_NEAR(s["gpuflame_gpu_lane_idle_gaps_total" + l], 3, 1e-9);
  EXPECT_NEAR(s["gpuflame_gpu_lane_kernels_total" + l], 10, 1e-9);
  EXPECT_NEAR(s["gpuflame_gpu_lane_sync_wait_seconds_total" + l], 0.007, 1e-9);
  EXPECT_NEAR(s["gpuflame_gpu_lane_short_kernel_ratio" + l], 0, 1e-9);
  EXPECT_NEAR(s["gpuflame_gpu_lane_kernel_max_seconds" + l], 0.005, 1e-9);
  const std::string copy = l.substr(0, l.size() - 1) + ",direction=\"h2d\"}";
  EXPECT_NEAR(s["gpuflame_gpu_lane_copy_bytes_total" + copy], 4096, 1e-9);
  // Gaps under 30%, busy under 70%: launch-bound by step 2.
  const std::string verdict = l.substr(0, l.size() - 1) + ",verdict=\"launch_bound\"}";
  EXPECT_NEAR(s["gpuflame_gpu_lane_verdict" + verdict], 1, 1e-9) << text;
  // A second window adds to the counters; one that observed nothing keeps the gauges.
  m.Update({Lane(42, 0, 1 * kS, 100 * kMs, 800 * kMs)}, Pods(&pod), NoGpu(), 2);
  m.Update({Lane(42, 0, 0, 0, 0)}, Pods(&pod), NoGpu(), 3);
  s = CheckExposition(PrometheusText(m.Metrics("node-a")));
  EXPECT_NEAR(s["gpuflame_gpu_lane_idle_gap_ratio" + l], 0.8, 1e-9);
  EXPECT_NEAR(s["gpuflame_gpu_lane_idle_gap_seconds_total" + l], 1.05, 1e-9);
  const std::string supply = l.substr(0, l.size() - 1) + ",verdict=\"supply\"}";
  EXPECT_NEAR(s["gpuflame_gpu_lane_verdict" + supply], 1, 1e-9);
}

TEST(GpuUtilizationMetricsTest, LanesAreCappedAndEndedOnesKeptTenMinutesThenGone) {
  GpuUtilizationMetrics m;
  std::vector<utilization::JudgedLane> many;
  for (pid_t pid = 1; pid <= 300; pid++) many.push_back(Lane(pid, 0, kS, kS / 2, 0));
  m.Update(many, Pods(nullptr), NoGpu(), kS);
  EXPECT_EQ(m.size(), GpuUtilizationMetrics::kMaxLanes);
  EXPECT_EQ(m.omitted(), 300 - GpuUtilizationMetrics::kMaxLanes);
  std::map<std::string, double> s = CheckExposition(PrometheusText(m.Metrics("")));
  EXPECT_NEAR(s["gpuflame_gpu_lane_omitted_total"], 44, 1e-9);
  EXPECT_TRUE(s.contains("gpuflame_gpu_lane_busy_ratio{pid=\"256\",device=\"0\"}"));
  EXPECT_FALSE(s.contains("gpuflame_gpu_lane_busy_ratio{pid=\"257\",device=\"0\"}"));

  // pid 1 ends: its figures stay, unchanged, for 10 minutes.
  utilization::JudgedLane last = Lane(1, 0, kS, kS / 4, 0);
  last.ended = true;
  m.Update({last}, Pods(nullptr), NoGpu(), 2 * kS);
  // A new lane when full pushes out the one ended longest ago, counted.
  m.Update({Lane(1000, 0, kS, kS, 0)}, Pods(nullptr), NoGpu(), 3 * kS);
  EXPECT_EQ(m.ended_dropped(), 1u);
  s = CheckExposition(PrometheusText(m.Metrics("")));
  EXPECT_FALSE(s.contains("gpuflame_gpu_lane_busy_ratio{pid=\"1\",device=\"0\"}"));
  EXPECT_TRUE(s.contains("gpuflame_gpu_lane_busy_ratio{pid=\"1000\",device=\"0\"}"));

  last = Lane(2, 0, kS, kS / 4, 0);
  last.ended = true;
  m.Update({last}, Pods(nullptr), NoGpu(), 4 * kS);
  m.Update({}, Pods(nullptr), NoGpu(), 4 * kS + GpuUtilizationMetrics::kKeepNs - 1);
  s = CheckExposition(PrometheusText(m.Metrics("")));
  EXPECT_NEAR(s["gpuflame_gpu_lane_busy_ratio{pid=\"2\",device=\"0\"}"], 0.25, 1e-9);
  m.Update({}, Pods(nullptr), NoGpu(), 4 * kS + GpuUtilizationMetrics::kKeepNs);
  s = CheckExposition(PrometheusText(m.Metrics("")));
  EXPECT_FALSE(s.contains("gpuflame_gpu_lane_busy_ratio{pid=\"2\",device=\"0\"}"));
}

// A busy lane: 1 s observed of the stretch [100, 110) s on CUPTI's clock,
// [50, 60) s on CLOCK_MONOTONIC; 900 ms busy, 20 ms in one idle gap, 100
// kernels of 1 ms (no slow tail, none tiny): steps 1 and 2 pass it.
utilization::JudgedLane Busy(pid_t pid, uint32_t device = 0) {
  utilization::JudgedLane l;
  l.pid = pid;
  l.device = device;
  l.judgement.from_ns = 100 * kS;
  l.judgement.to_ns = 110 * kS;
  l.from_mono_ns = 50 * kS;
  l.to_mono_ns = 60 * kS;
  l.judgement.observed_ns = kS;
  l.judgement.figures.end_ns = kS;
  l.judgement.figures.busy_ns = 900 * kMs;
  l.judgement.figures.gap_ns = 20 * kMs;
  l.judgement.figures.gaps = 1;
  for (int i = 0; i < 100; i++) {
    l.judgement.figures.kernels++;
    l.judgement.figures.kernel_durations.Add(kMs);
  }
  return l;
}

GpuIdentity Gpu(uint32_t index) {
  GpuIdentity g;
  g.index = index;
  g.uuid = absl::StrCat("GPU-", index);
  g.gpm = true;
  return g;
}

// GPU 1 read once a second from 49 s to 60 s on CLOCK_MONOTONIC: GPM's DRAM
// bandwidth 70% and 80% in turn inside [50, 60) s (mean 75%), SMs 90%; the
// readings at 49 s and 60 s, outside the stretch, at 0% and 100%. With
// |gpm| false, no GPM: the classic utilisation 95% inside.
bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

utilization::DeviceFigures Figures(bool gpm = true) {
  utilization::DeviceFigures f({Gpu(0), Gpu(1)});
  for (uint64_t t = 49; t <= 60; t++) {
    const bool inside = t >= 50 && t < 60;
    GpuReading r;
    r.index = 1;
    r.util_gpu = inside ? 95 : 10;
    if (gpm) {
      GpmFigures g;
      g.sm_util = inside ? 90 : 0;
      g.dram_bw_util = !inside ? (t == 49 ? 0 : 100) : t % 2 ? 80 : 70;
      r.gpm = g;
    }
    f.Add(t * kS, {r});
  }
  return f;
}

// NVML's GPUs 0 and 1 (Gpu()), the process listed on |on| alone (or on
// none, or several: nullopt).
GpuOf ListedOn(std::optional<uint32_t> on) {
  return [on](pid_t, const std::string& uuid) -> std::optional<GpuIdentity> {
    if (!uuid.empty()) {
      for (uint32_t i : {0u, 1u})
        if (Gpu(i).uuid == uuid) return Gpu(i);
      return std::nullopt;
    }
    return on ? std::optional<GpuIdentity>(Gpu(*on)) : std::nullopt;
  };
}

GpuUtilizationMetrics::DeviceOf Join(const utilization::DeviceFigures& f, std::optional<uint32_t> on,
                                     size_t lanes = 1) {
  return [&f, on, lanes](const utilization::JudgedLane& l) {
    return JoinLaneDevice(l, lanes, ListedOn(on),
                          [&f](uint32_t index, uint64_t from, uint64_t to) { return f.Over(index, from, to); });
  };
}

TEST(GpuUtilizationMetricsTest, ABusyLaneOnAGpuAtSixtyPercentDramOrMoreIsMemoryBound) {
  const utilization::DeviceFigures f = Figures();
  GpuUtilizationMetrics m;
  m.Update({Busy(42)}, Pods(nullptr), Join(f, 1), kS);
  const std::string text = PrometheusText(m.Metrics("node-a"));
  std::map<std::string, double> s = CheckExposition(text);
  const std::string l = "{node=\"node-a\",pid=\"42\",device=\"0\",gpu=\"1\",uuid=\"GPU-1\"";
  // The readings of [50, 60) s only: 75%, not the 100% at 60 s nor the 0% at 49 s.
  EXPECT_DOUBLE_EQ(s["gpuflame_gpu_lane_device_dram_bandwidth_ratio" + l + ",source=\"gpm\"}"], 0.75) << text;
  EXPECT_DOUBLE_EQ(s["gpuflame_gpu_lane_device_sm_ratio" + l + ",source=\"gpm\"}"], 0.9) << text;
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict" + l + ",verdict=\"memory_bound\"}"], 1) << text;
  EXPECT_FALSE(Has(text, "verdict=\"busy\""));
  EXPECT_TRUE(m.not_joined().empty());
  EXPECT_FALSE(Has(text, "gpuflame_gpu_lane_device_not_joined_total"));

  // The same lane on a GPU at 40% (under 60%): busy, the figure still said.
  utilization::DeviceFigures low({Gpu(0), Gpu(1)});
  for (uint64_t t = 50; t < 60; t++) {
    GpuReading r;
    r.index = 1;
    GpmFigures g;
    g.sm_util = 50;
    g.dram_bw_util = 40;
    r.gpm = g;
    low.Add(t * kS, {r});
  }
  GpuUtilizationMetrics b;
  b.Update({Busy(42)}, Pods(nullptr), Join(low, 1), kS);
  s = CheckExposition(PrometheusText(b.Metrics("node-a")));
  EXPECT_DOUBLE_EQ(s["gpuflame_gpu_lane_device_dram_bandwidth_ratio" + l + ",source=\"gpm\"}"], 0.4);
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict" + l + ",verdict=\"busy\"}"], 1);
}

TEST(GpuUtilizationMetricsTest, ALaneWhoseGpuIsAmbiguousIsNeverJudgedMemoryBound) {
  const utilization::DeviceFigures f = Figures();
  GpuUtilizationMetrics m;
  // NVML lists pid 42 on two GPUs (gpu_of says none); pid 43 has two lanes,
  // listed on GPU 1 alone: which of its lanes is GPU 1 is not known.
  m.Update({Busy(42)}, Pods(nullptr), Join(f, std::nullopt), kS);
  m.Update({Busy(43, 0), Busy(43, 1)}, Pods(nullptr), Join(f, 1, /*lanes=*/2), kS);
  const std::string text = PrometheusText(m.Metrics(""));
  std::map<std::string, double> s = CheckExposition(text);
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict{pid=\"42\",device=\"0\",verdict=\"busy\"}"], 1) << text;
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict{pid=\"43\",device=\"0\",verdict=\"busy\"}"], 1) << text;
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict{pid=\"43\",device=\"1\",verdict=\"busy\"}"], 1) << text;
  EXPECT_FALSE(Has(text, "verdict=\"memory_bound\""));
  EXPECT_FALSE(Has(text, "gpuflame_gpu_lane_device_dram_bandwidth_ratio{"));
  EXPECT_FALSE(Has(text, "gpuflame_gpu_lane_device_sm_ratio{"));
  EXPECT_FALSE(Has(text, "gpu=\""));  // nor named
  EXPECT_EQ(s["gpuflame_gpu_lane_device_not_joined_total{reason=\"gpu_unknown\"}"], 1);
  EXPECT_EQ(s["gpuflame_gpu_lane_device_not_joined_total{reason=\"several_lanes\"}"], 2);
}

// The library's UUIDs tie each lane to its GPU however many the process
// uses and whatever NVML's process lists say; a UUID NVML does not list
// (a MIG instance's) leaves it to the lists.
TEST(GpuUtilizationMetricsTest, TheLibrarysUuidsTieEachOfTwoLanesToItsGpu) {
  const utilization::DeviceFigures f = Figures();
  GpuUtilizationMetrics m;
  // Ordinal 0 is NVML's GPU 1 and ordinal 1 GPU 0 (CUDA_VISIBLE_DEVICES=1,0);
  // NVML lists the process on both, so its lists alone tie neither.
  utilization::JudgedLane a = Busy(43, 0), b = Busy(43, 1), mig = Busy(44, 0), mig_listed = Busy(45, 0);
  a.uuid = Gpu(1).uuid;
  b.uuid = Gpu(0).uuid;
  mig.uuid = mig_listed.uuid = "GPU-5eed0000-0000-4000-8000-00000000009f";
  m.Update({a, b}, Pods(nullptr), Join(f, std::nullopt, /*lanes=*/2), kS);
  m.Update({mig}, Pods(nullptr), Join(f, std::nullopt), kS);
  m.Update({mig_listed}, Pods(nullptr), Join(f, 1), kS);
  const std::string text = PrometheusText(m.Metrics(""));
  std::map<std::string, double> s = CheckExposition(text);
  // GPU 1 has readings in the stretch (GPM: DRAM 75%), GPU 0 none.
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict{pid=\"43\",device=\"0\",gpu=\"1\",uuid=\"GPU-1\",verdict=\"memory_bound\"}"],
            1)
      << text;
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict{pid=\"43\",device=\"1\",gpu=\"0\",uuid=\"GPU-0\",verdict=\"busy\"}"], 1)
      << text;
  // Pid 44's library names a GPU NVML does not list, and NVML lists pid 44
  // on none; pid 45 likewise, but NVML lists it on GPU 1 alone.
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict{pid=\"44\",device=\"0\",verdict=\"busy\"}"], 1) << text;
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict{pid=\"45\",device=\"0\",gpu=\"1\",uuid=\"GPU-1\",verdict=\"memory_bound\"}"],
            1)
      << text;
  EXPECT_EQ(s["gpuflame_gpu_lane_device_not_joined_total{reason=\"no_readings\"}"], 1);
  EXPECT_EQ(s["gpuflame_gpu_lane_device_not_joined_total{reason=\"uuid_unlisted\"}"], 1);
  EXPECT_FALSE(m.not_joined().contains("several_lanes"));
}

TEST(GpuUtilizationMetricsTest, JoinsOnlyWithAClockPairAndReadingsInTheStretchAndSaysWhyNot) {
  const utilization::DeviceFigures f = Figures();
  const GpuOf on1 = ListedOn(1);
  const DeviceOver over = [&f](uint32_t index, uint64_t from, uint64_t to) { return f.Over(index, from, to); };
  LaneDevice d = JoinLaneDevice(Busy(1), 1, on1, over);
  ASSERT_TRUE(d.stats);
  EXPECT_EQ(d.stats->readings, 10u);
  EXPECT_EQ(d.stats->gpm_dram.sum, 750);
  EXPECT_EQ(d.gpu->index, 1u);
  EXPECT_EQ(d.not_joined, nullptr);
  EXPECT_STREQ(JoinLaneDevice(Busy(1), 1, nullptr, nullptr).not_joined, "no_nvml");
  EXPECT_STREQ(JoinLaneDevice(Busy(1), 3, on1, over).not_joined, "several_lanes");
  utilization::JudgedLane no_clock = Busy(1);
  no_clock.from_mono_ns = no_clock.to_mono_ns = std::nullopt;
  d = JoinLaneDevice(no_clock, 1, on1, over);
  EXPECT_STREQ(d.not_joined, "no_clock");
  EXPECT_FALSE(d.stats);
  EXPECT_EQ(d.gpu->index, 1u);  // named still: the rule for the labels holds
  utilization::JudgedLane later = Busy(1);
  later.from_mono_ns = 70 * kS;  // the readings end at 60 s
  later.to_mono_ns = 80 * kS;
  EXPECT_STREQ(JoinLaneDevice(later, 1, on1, over).not_joined, "no_readings");
  // GPU 0 was never read.
  const GpuOf on0 = ListedOn(0);
  EXPECT_STREQ(JoinLaneDevice(Busy(1), 1, on0, over).not_joined, "no_readings");
}

TEST(GpuUtilizationMetricsTest, WithoutGpmTheClassicUtilisationIsSaidAndStepThreeIsNotJudged) {
  const utilization::DeviceFigures f = Figures(/*gpm=*/false);
  GpuUtilizationMetrics m;
  m.Update({Busy(42)}, Pods(nullptr), Join(f, 1), kS);
  const std::string text = PrometheusText(m.Metrics(""));
  std::map<std::string, double> s = CheckExposition(text);
  const std::string l = "{pid=\"42\",device=\"0\",gpu=\"1\",uuid=\"GPU-1\"";
  EXPECT_DOUBLE_EQ(s["gpuflame_gpu_lane_device_sm_ratio" + l + ",source=\"classic\"}"], 0.95) << text;
  EXPECT_FALSE(Has(text, "gpuflame_gpu_lane_device_dram_bandwidth_ratio{"));
  EXPECT_EQ(s["gpuflame_gpu_lane_verdict" + l + ",verdict=\"busy\"}"], 1);
  EXPECT_TRUE(m.not_joined().empty());  // joined: the GPU has no GPM, which is no failure to join
  // A later window not joined clears the figures: they were of another stretch.
  m.Update({Busy(42)}, Pods(nullptr), Join(f, std::nullopt), 2 * kS);
  const std::string after = PrometheusText(m.Metrics(""));
  EXPECT_FALSE(Has(after, "gpuflame_gpu_lane_device_sm_ratio{")) << after;
}

}  // namespace
}  // namespace gpuflame::profiler
