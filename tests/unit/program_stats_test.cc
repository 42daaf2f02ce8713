// gpuflame's own cost: the arithmetic on the kernel's per-program run-time
// counters, and where the figures are shown (summary.json, the terminal
// line, /metrics). The kernel side (stats on, counters that grow as the
// programs run) is checked end to end, as root: RecordTest.SummarySaysWhatItsBpfProgramsCost.
#include "profiler/probes/program_stats.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "agent/metrics_server.h"
#include "agent/self_metrics.h"
#include "app/record_output.h"
#include "gtest/gtest.h"

namespace gpuflame::profiler {
namespace {

TEST(ProgramStatsTest, CostIsTheDifferenceOfTwoReadsProgramByProgram) {
  const std::vector<ProgramRunStats> before = {{"alloc_enter", 10, 5'000}, {"free_enter", 4, 1'000}};
  const std::vector<ProgramRunStats> after = {
      {"free_enter", 6, 1'800}, {"alloc_enter", 30, 15'000}, {"torch_malloc", 7, 700}};
  std::vector<ProgramCost> c = ProgramCostBetween(before, after);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].name, "free_enter") << "in the order of the later read";
  EXPECT_EQ(c[0].hits, 2u);
  EXPECT_EQ(c[0].ns_total, 800u);
  EXPECT_DOUBLE_EQ(c[0].ns_per_hit(), 400);
  EXPECT_EQ(c[1].hits, 20u);
  EXPECT_EQ(c[1].ns_total, 10'000u);
  EXPECT_EQ(c[2].hits, 7u) << "loaded in between: counts from zero";
  EXPECT_EQ(c[2].ns_total, 700u);
  const ProgramCost total = TotalCost(c);
  EXPECT_EQ(total.hits, 29u);
  EXPECT_EQ(total.ns_total, 11'500u);
}

TEST(ProgramStatsTest, CountersThatWentBackwardsCountFromZero) {
  // Another object loaded under the same names (a new session): its
  // counters started again, so the later read is the whole cost.
  std::vector<ProgramCost> c = ProgramCostBetween(std::vector<ProgramRunStats>{{"alloc_enter", 100, 9'000}},
                                                  std::vector<ProgramRunStats>{{"alloc_enter", 3, 300}});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].hits, 3u);
  EXPECT_EQ(c[0].ns_total, 300u);
  const ProgramCost idle{"idle", 0, 0};
  EXPECT_DOUBLE_EQ(idle.ns_per_hit(), 0) << "no division by zero";
}

// The budget counts the programs that work in the profiled processes: the
// lifecycle programs on kernel tracepoints run in every process of the node
// (every syscall's exit), and a busy node must not shed an idle workload.
TEST(ProgramStatsTest, TheBudgetLeavesTheMachineWidePrograms) {
  const std::vector<ProgramRunStats> programs = {{"alloc_enter", 10, 5'000},
                                                 {"watch_mmap", 1'000'000, 40'000'000, /*machine_wide=*/true},
                                                 {"cpu_sample", 4, 2'000},
                                                 {"watch_exit", 30, 900, /*machine_wide=*/true}};
  EXPECT_EQ(InProcessRunTimeNs(programs), 7'000u);
  EXPECT_EQ(InProcessRunTimeNs({}), 0u);
  // The difference of two reads keeps the scope.
  std::vector<ProgramCost> c = ProgramCostBetween({}, programs);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_FALSE(c[0].machine_wide);
  EXPECT_TRUE(c[1].machine_wide);
}

TEST(ProgramStatsTest, AnOwnerThatWasNeverEnabledSaysSoAndReadsNothing) {
  ProgramStats off;
  EXPECT_FALSE(off.available());
  EXPECT_EQ(off.Describe(), "unavailable: not enabled");
  EXPECT_TRUE(off.Read(nullptr).empty());
  ProgramStats moved = std::move(off);
  EXPECT_FALSE(moved.available());
}

SelfCost Cost() {
  return SelfCost{
      "on",
      {{"alloc_enter", 1'000'000, 600'000'000}, {"torch_malloc", 460'000, 630'000'000}, {"watch_exit", 0, 0}},
      0.414,
      {}};
}

SelfCost WithLibrary() {
  SelfCost c = Cost();
  c.library = {200'000, 40'000'000, 3'000'000, 9'000'000, 5'000'000, 2};
  return c;
}

TEST(SelfCostTest, SummaryJsonHasEveryProgramAndTheTotals) {
  nlohmann::json j = nlohmann::json::parse(SelfCostJson(Cost()), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << SelfCostJson(Cost());
  EXPECT_EQ(j["bpf_stats"], "on");
  EXPECT_EQ(j["bpf_hits"], 1'460'000u);
  EXPECT_EQ(j["bpf_ns_total"], 1'230'000'000u);
  EXPECT_NEAR(j["bpf_ns_per_hit"].get<double>(), 842.5, 0.1);
  EXPECT_NEAR(j["gpuflame_cpu_seconds"].get<double>(), 0.414, 1e-9);
  ASSERT_EQ(j["programs"].size(), 3u) << "programs that never ran are listed too";
  EXPECT_EQ(j["programs"]["torch_malloc"]["hits"], 460'000u);
  EXPECT_EQ(j["programs"]["torch_malloc"]["ns_total"], 630'000'000u);
  EXPECT_NEAR(j["programs"]["alloc_enter"]["ns_per_hit"].get<double>(), 600, 0.01);
  EXPECT_EQ(j["programs"]["watch_exit"]["ns_per_hit"], 0.0);
  EXPECT_EQ(j["programs"]["watch_exit"]["machine_wide"], false);
  EXPECT_EQ(j["bpf_ns_machine_wide"], 0u);
  EXPECT_EQ(j["library"]["processes"], 0u) << "no library reported";
}

TEST(SelfCostTest, TheMachineWideProgramsAreSaidApart) {
  SelfCost c = Cost();
  c.programs.push_back({"watch_mmap", 2'000'000, 70'000'000, /*machine_wide=*/true});
  nlohmann::json j = nlohmann::json::parse(SelfCostJson(c), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << SelfCostJson(c);
  EXPECT_EQ(j["bpf_ns_total"], 1'300'000'000u) << "the total has every program";
  EXPECT_EQ(j["bpf_ns_machine_wide"], 70'000'000u);
  EXPECT_EQ(j["programs"]["watch_mmap"]["machine_wide"], true);
  EXPECT_EQ(SelfCostLine(c),
            "gpuflame cost: 1.30 s in BPF programs (0.38 µs per hit, 3.46 M hits), of which 70.0 ms machine-wide "
            "(process lifecycle on every process of the node), 0.41 s CPU in gpuflame");
}

TEST(SelfCostTest, TheLibrarysOwnTimeIsItsHookCallbacksAndThreads) {
  nlohmann::json j = nlohmann::json::parse(SelfCostJson(WithLibrary()), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << SelfCostJson(WithLibrary());
  EXPECT_EQ(j["library"]["processes"], 2u);
  EXPECT_EQ(j["library"]["ns_total"], 52'000'000u) << "CUPTI's own overhead records are reported apart";
  EXPECT_EQ(j["library"]["cupti_overhead_records_ns"], 5'000'000u);
  EXPECT_NEAR(j["library"]["tensor_hook_ns_per_event"].get<double>(), 200.0, 1e-9);
  EXPECT_EQ(SelfCostLine(WithLibrary()),
            "gpuflame cost: 1.23 s in BPF programs (0.84 µs per hit, 1.46 M hits), 52.0 ms in the workloads' library "
            "(0.20 µs per tensor event), 0.41 s CPU in gpuflame");
}

TEST(SelfCostTest, UnavailableStatsAndUnknownCpuStillMakeValidJson) {
  nlohmann::json j = nlohmann::json::parse(SelfCostJson({"unavailable: \"EPERM\"", {}, -1, {}}), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["bpf_stats"], "unavailable: \"EPERM\"");
  EXPECT_TRUE(j["gpuflame_cpu_seconds"].is_null());
  EXPECT_TRUE(j["programs"].empty());
}

TEST(SelfCostTest, TerminalLine) {
  EXPECT_EQ(SelfCostLine(Cost()),
            "gpuflame cost: 1.23 s in BPF programs (0.84 µs per hit, 1.46 M hits), 0.41 s CPU in gpuflame");
  EXPECT_EQ(SelfCostLine({"on", {{"alloc_enter", 12, 6'000}}, 0.05, {}}),
            "gpuflame cost: 6 µs in BPF programs (0.50 µs per hit, 12 hits), 0.05 s CPU in gpuflame");
  EXPECT_EQ(SelfCostLine({"on", {{"alloc_enter", 0, 0}}, -1, {}}), "gpuflame cost: no BPF program ran");
  EXPECT_EQ(SelfCostLine({"unavailable: BPF_ENABLE_STATS needs CAP_SYS_ADMIN", {}, 1.5, {}}),
            "gpuflame cost: BPF run time unavailable: BPF_ENABLE_STATS needs CAP_SYS_ADMIN, 1.50 s CPU in gpuflame");
}

TEST(MetricsTest, LabelledSeriesShareOneHelpAndTypeAndEscapeTheirValues) {
  std::string t =
      PrometheusText({{"gpuflame_bpf_program_runs_total", "Runs.", "counter", 3, {{"program", "alloc_enter"}}},
                      {"gpuflame_bpf_program_runs_total", "Runs.", "counter", 4, {{"program", "a\"b\\c\nd"}}},
                      {"gpuflame_events_total", "Events.", "counter", 1}});
  EXPECT_EQ(t,
            "# HELP gpuflame_bpf_program_runs_total Runs.\n# TYPE gpuflame_bpf_program_runs_total counter\n"
            "gpuflame_bpf_program_runs_total{program=\"alloc_enter\"} 3\n"
            "gpuflame_bpf_program_runs_total{program=\"a\\\"b\\\\c\\nd\"} 4\n"
            "# HELP gpuflame_events_total Events.\n# TYPE gpuflame_events_total counter\ngpuflame_events_total 1\n");
}

TEST(MetricsTest, EachBpfProgramHasARunCounterAndARunTimeCounter) {
  AgentStats s;
  s.bpf_stats_on = true;
  s.self_cpu_seconds = 2.5;
  s.bpf_programs = {{"alloc_enter", 10, 2'000'000'000},
                    {"torch_malloc", 5, 500'000'000},
                    {"watch_mmap", 9000, 250'000'000, /*machine_wide=*/true}};
  std::string t = PrometheusText(SelfMetrics(s));
  EXPECT_NE(t.find("\ngpuflame_bpf_program_runs_total{program=\"alloc_enter\",scope=\"profiled\"} 10\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\ngpuflame_bpf_program_runs_total{program=\"torch_malloc\",scope=\"profiled\"} 5\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\ngpuflame_bpf_program_run_seconds_total{program=\"alloc_enter\",scope=\"profiled\"} 2\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\ngpuflame_bpf_program_run_seconds_total{program=\"torch_malloc\",scope=\"profiled\"} 0.5\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\ngpuflame_bpf_program_run_seconds_total{program=\"watch_mmap\",scope=\"node\"} 0.25\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\ngpuflame_bpf_stats_enabled 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\ngpuflame_self_cpu_seconds_total 2.5\n"), std::string::npos) << t;
  // One HELP per family, however many programs.
  size_t helps = 0;
  for (size_t p = t.find("# HELP gpuflame_bpf_program_runs_total "); p != std::string::npos;
       p = t.find("# HELP gpuflame_bpf_program_runs_total ", p + 1))
    helps++;
  EXPECT_EQ(helps, 1u) << t;
}

}  // namespace
}  // namespace gpuflame::profiler
