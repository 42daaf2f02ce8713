// The agent's per-window GPU utilisation metrics (agent/gpu_utilization.h):
// valid exposition (one HELP and TYPE per family, its series together), the
// figures of a judgement, the cap on lanes and the retention of ended ones.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/gpu_utilization.h"
#include "agent/metrics_server.h"

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
GpuUtilizationMetrics::GpuOf NoGpu() {
  return [](pid_t) { return std::optional<GpuIdentity>(); };
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
      [](pid_t) {
        GpuIdentity g;
        g.index = 3;
        g.uuid = "GPU-abc";
        return std::optional<GpuIdentity>(g);
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

}  // namespace
}  // namespace gpuflame::profiler
