// Kernel time end to end: `gpuflame record` loads the real
// libgpuflame_cupti.so into a Python workload (CUDA_INJECTION64_PATH), which
// runs on the simulated CUDA driver, runtime and CUPTI (test fixture: no
// GPU). Real USDT probes, real BPF stack capture, real correlation join;
// what the fixture's "GPU" reports is exact, so the profile must be too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t kUs = 1000;
const std::string kGemm = "void cutlass::Kernel<cutlass::gemm::kernel::Gemm>(cutlass::gemm::kernel::Gemm::Params)";
const std::string kRelu = "void at::native::vectorized_elementwise_kernel<4, at::native::Relu>(int, at::native::Relu)";

RunResult RecordKernels(const std::string& out, const std::string& env = "", const std::string& flags = "") {
  return Sh(SimEnv() + " " + env + " " + GPUFLAME_BIN + " record -q " + flags + " -o " + out + " -- " +
            PyenvPython("3.12") + " " + Workload("kernels.py"));
}

// Time per leaf (kernel), whatever the stack.
std::map<std::string, int64_t> ByLeaf(const std::map<std::string, int64_t>& stacks) {
  std::map<std::string, int64_t> out;
  for (const auto& [stack, v] : stacks) out[stack.substr(stack.rfind(';') + 1)] += v;
  return out;
}

TEST(KernelTimeTest, EveryKernelOnItsLaunchingMethodExactly) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string out = TempDir("kernels");
  RunResult r = RecordKernels(out, "GPUFLAME_LAUNCH_STACKS_PER_S=0");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile k;
  ASSERT_TRUE(LoadPprof(out + "/gpu_kernel.pb.gz", &k)) << r.output;
  ASSERT_EQ(k.sample_type_size(), 2);
  EXPECT_EQ(k.string_table(k.sample_type(0).type()), "time");
  EXPECT_EQ(k.string_table(k.sample_type(0).unit()), "nanoseconds");
  EXPECT_EQ(k.string_table(k.sample_type(1).type()), "launches");
  auto time = Stacks(k, "time", /*drop_trampolines=*/true, /*drop_native=*/true);
  auto launches = Stacks(k, "launches", true, true);
  // Python frames, then the launching API (a native leaf is kept: the API
  // the kernel came from), then the demangled kernel name.
  EXPECT_EQ(time["<module>;Model > forward;launch;" + kGemm], 20 * 300 * kUs) << Dump(time);
  EXPECT_EQ(launches["<module>;Model > forward;launch;" + kGemm], 20) << Dump(launches);
  EXPECT_EQ(time["<module>;Model > forward;launch_driver;" + kRelu], 20 * 50 * kUs) << Dump(time);
  // One graph launch, three kernels, each charged to the graph's launch.
  EXPECT_EQ(time["<module>;Model > backward;graph_launch;attn_fwd"], 10 * 100 * kUs) << Dump(time);
  EXPECT_EQ(time["<module>;Model > backward;graph_launch;attn_bwd"], 10 * 200 * kUs) << Dump(time);
  EXPECT_EQ(time["<module>;Model > backward;graph_launch;ampere_sgemm_128x64_nn"], 10 * 300 * kUs) << Dump(time);
  EXPECT_EQ(launches["<module>;Model > backward;graph_launch;attn_bwd"], 10) << Dump(launches);
  EXPECT_EQ(time["<module>;load_batch;memcpy_htod;[memcpy HtoD]"], 4 * 8 * kUs) << Dump(time);
  EXPECT_EQ(Total(k, "time"), 13 * 1000 * kUs + 32 * kUs);
  // With native frames: the launching API sits right above the kernel.
  auto full = Stacks(k, "time");
  // Taken in the driver's launch call, also under the runtime's: the
  // driver's frames under the runtime's call are not shown.
  bool via_runtime = false, via_driver = false;
  for (const auto& [stack, v] : full) {
    via_runtime |= stack.ends_with(";cudaLaunchKernel;" + kGemm);
    via_driver |= stack.ends_with(";cuLaunchKernel;" + kRelu);
    EXPECT_EQ(stack.find("cudaLaunchKernel;cuLaunchKernel"), std::string::npos) << stack;
  }
  EXPECT_TRUE(via_runtime) << Dump(full);
  EXPECT_TRUE(via_driver) << Dump(full);
  // Every record joined to its own launch's stack, but for a rare launch
  // event that reaches the joiner after its kernel on a loaded machine (1 in
  // 54 in CI, under clang-tidy): charged by share, and counted as such.
  const std::string summary = ReadFile(out + "/summary.json");
  auto json = nlohmann::json::parse(summary, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << summary;
  const auto& joins = json["gpu_kernels"];
  EXPECT_EQ(joins["joined"].get<int>() + joins["charged_by_sampled_share"].get<int>(), 74) << summary;
  EXPECT_GE(joins["joined"].get<int>(), 70) << summary;
  RunResult top = Sh("go tool pprof -top -sample_index=time " + out + "/gpu_kernel.pb.gz");
  ASSERT_EQ(top.status, 0) << top.output;
  EXPECT_NE(top.output.find("cutlass::Kernel"), std::string::npos) << top.output;
  EXPECT_NE(ReadFile(out + "/flamegraph.html").find("gpu_kernel"), std::string::npos);
}

// The launch route (--launch-stacks uprobes): no CUPTI callback at all; the
// stacks are taken by uprobes on libcuda's cuLaunchKernel (the runtime's
// launches enter it too), in the library's launch windows (the start-up's
// from before the first launch), and joined to CUPTI's records of those
// calls by thread and time. The simulated runtime's graph launches and
// copies enter no driver entry point (a real runtime's graph launches enter
// cuGraphLaunch): their time is charged without a stack, and counted.
TEST(KernelTimeTest, LaunchStacksByUprobesJoinTheirKernelsWithoutCallbacks) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string dir = TempDir("kernels-route");
  // Its own copy of the library (see TheLibraryCostsOnlyItsPrimingUntilAnAgentAttaches).
  std::string lib = dir + "/libgpuflame_cupti.so";
  std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib);
  RunResult r = Sh(SimEnv() + " CUDA_INJECTION64_PATH=" + lib + " GF_SIM_CUPTI_REPORT=" + dir + "/report.txt " +
                   GPUFLAME_BIN + " record -q --launch-stacks uprobes -o " + dir + "/out -- " + PyenvPython("3.12") +
                   " " + Workload("kernels.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string report = ReadFile(dir + "/report.txt");
  EXPECT_EQ(report.rfind("delivered=0 activity=1", 0), 0u) << report;
  pprof::Profile k;
  ASSERT_TRUE(LoadPprof(dir + "/out/gpu_kernel.pb.gz", &k)) << r.output;
  auto time = Stacks(k, "time", /*drop_trampolines=*/true, /*drop_native=*/true);
  EXPECT_EQ(time["<module>;Model > forward;launch;" + kGemm], 20 * 300 * kUs) << Dump(time);
  EXPECT_EQ(time["<module>;Model > forward;launch_driver;" + kRelu], 20 * 50 * kUs) << Dump(time);
  // Copies by the route too: the runtime's copy enters libcuda's cuMemcpy.
  EXPECT_EQ(time["<module>;load_batch;memcpy_htod;[memcpy HtoD]"], 4 * 8 * kUs) << Dump(time);
  EXPECT_EQ(Total(k, "time"), 13 * 1000 * kUs + 32 * kUs);
  // The launching function sits right above the kernel, as the callbacks' stacks have it.
  bool via_driver = false, copy_via_runtime = false;
  for (const auto& [stack, v] : Stacks(k, "time")) {
    via_driver |= stack.ends_with(";cuLaunchKernel;" + kRelu);
    // Taken in the driver's cuMemcpy, shown under the runtime's call that made it.
    copy_via_runtime |= stack.ends_with(";cudaMemcpy;[memcpy HtoD]");
  }
  EXPECT_TRUE(via_driver) << Dump(Stacks(k, "time"));
  EXPECT_TRUE(copy_via_runtime) << Dump(Stacks(k, "time"));
  auto json = nlohmann::json::parse(ReadFile(dir + "/out/summary.json"), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  const auto& route = json["gpu_kernels"]["launch_route"];
  // 20 runtime and 20 driver launches, 4 copies; the graph's one launch
  // does not enter libcuda in the fixture.
  EXPECT_EQ(route["hits"].get<int>(), 44) << route;
  EXPECT_EQ(route["records"].get<int>(), 44) << route;
  EXPECT_EQ(route["joined"].get<int>(), 44) << route;
  EXPECT_EQ(route["records_unconverted"].get<int>(), 0) << route;
  EXPECT_GE(route["windows"].get<int>(), 1) << route;
}

// A driver whose launch callback inside cudaLaunchKernel has an ID of its
// own (the fixture plays one), not the kernel's: the library's check of its
// first launch stacks finds that they join nothing, says so, and takes
// them in the runtime's launch calls from then on. With the fixture's
// usual driver (the H100's behaviour) the check passes and nothing is said.
TEST(KernelTimeTest, WhereTheDriversCallHasAnIdOfItsOwnStacksMoveToTheRuntimesCall) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  constexpr const char* kSaid = "do not carry their kernels' correlation IDs";
  for (const bool own_ids : {true, false}) {
    SCOPED_TRACE(own_ids ? "the nested call's own IDs" : "the runtime's ID");
    std::string dir = TempDir(own_ids ? "kernels-own-ids" : "kernels-shared-ids");
    // The second round half a second after the first (30 s by default); a
    // launch stack for every launch all the run long (the start-up's rule).
    RunResult r = Sh(SimEnv() + (own_ids ? " GF_SIM_NESTED_OWN_IDS=1" : "") +
                     " GPUFLAME_CORRELATION_RETRY_S=0.5 GPUFLAME_STARTUP_S=60 " + GPUFLAME_BIN + " record -o " + dir +
                     " -- " + PyenvPython("3.12") + " " + Workload("steady_kernels.py") + " 7");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output.find(kSaid) != std::string::npos, own_ids) << r.output;
    auto json = nlohmann::json::parse(ReadFile(dir + "/summary.json"), nullptr, false);
    ASSERT_FALSE(json.is_discarded());
    const auto& joins = json["gpu_kernels"];
    // Callbacks, and nobody asked for the launch route: no word of it,
    // though the library's priming sent its records.
    EXPECT_FALSE(joins.contains("launch_route")) << joins;
    const int64_t joined = joins["joined"].get<int64_t>();
    const int64_t unjoined =
        joins["charged_by_sampled_share"].get<int64_t>() + joins["launch_stack_not_sampled"].get<int64_t>();
    // The check decides about 5 s in (two rounds of 128 stacks, records from
    // 1000 IDs past them, 2 s each): before it, with the nested call's own
    // IDs, no stack joined; after, every one.
    if (own_ids) {
      EXPECT_GT(joined, unjoined / 8) << joins;
      EXPECT_GT(unjoined, 0) << joins;  // the kernels launched before it
    } else {
      EXPECT_GT(joined, 20 * unjoined) << joins;
    }
  }
}

TEST(KernelTimeTest, SampledLaunchStacksKeepTotalsExact) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string out = TempDir("kernels-sampled");
  // One launch stack per thread per 10 s, after a burst of one: most kernels
  // complete without a sampled stack of their own.
  RunResult r = RecordKernels(out, "GPUFLAME_LAUNCH_STACKS_PER_S=0.1");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile k;
  ASSERT_TRUE(LoadPprof(out + "/gpu_kernel.pb.gz", &k)) << r.output;
  auto leaf = ByLeaf(Stacks(k, "time", true, true));
  EXPECT_EQ(leaf[kGemm], 20 * 300 * kUs) << Dump(leaf);
  EXPECT_EQ(leaf[kRelu], 20 * 50 * kUs) << Dump(leaf);
  EXPECT_EQ(leaf["attn_bwd"], 10 * 200 * kUs) << Dump(leaf);
  EXPECT_EQ(Total(k, "time"), 13 * 1000 * kUs + 32 * kUs);
  EXPECT_EQ(Total(k, "launches"), 20 + 20 + 30 + 4);
  // The one sampled launch (the first: a host-to-device copy) carries its
  // own; the rest are charged to it by kernel, or shown as unsampled.
  auto stacks = Stacks(k, "time", true, true);
  EXPECT_EQ(stacks["<module>;load_batch;memcpy_htod;[memcpy HtoD]"], 4 * 8 * kUs) << Dump(stacks);
  EXPECT_EQ(stacks["[launch stack not sampled];" + kGemm], 20 * 300 * kUs) << Dump(stacks);
  std::string summary = ReadFile(out + "/summary.json");
  EXPECT_NE(summary.find("\"launch_stacks\": 1,"), std::string::npos) << summary;
}

// "kernels=recorded/run" from the simulated CUPTI's exit report.
std::pair<int64_t, int64_t> KernelsRecordedAndRun(const std::string& report) {
  size_t at = report.find("kernels=");
  if (at == std::string::npos) return {-1, -1};
  long long recorded = -1, run = -1;
  std::sscanf(report.c_str() + at, "kernels=%lld/%lld", &recorded, &run);
  return {recorded, run};
}

// "api_records=N" from the simulated CUPTI's exit report.
int64_t ApiRecordsMade(const std::string& report) {
  const size_t at = report.find("api_records=");
  return at == std::string::npos ? -1 : std::stoll(report.substr(at + 12));
}

TEST(KernelTimeTest, TheLibraryCostsOnlyItsPrimingUntilAnAgentAttaches) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string dir = TempDir("kernels-idle");
  // Loaded (a pod that opted in) but no agent: no CUPTI callback, no
  // activity; only the launch route's priming, CUPTI's records of the first
  // launch calls, until the flusher has seen one.
  // A copy of the library: probes on a file stay until their last descriptor
  // closes, and earlier tests' sessions may still be letting go of theirs.
  std::string lib = dir + "/libgpuflame_cupti.so";
  std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib);
  RunResult idle = Sh(SimEnv() + " CUDA_INJECTION64_PATH=" + lib + " GF_SIM_CUPTI_REPORT=" + dir +
                      "/idle.txt " + PyenvPython("3.12") + " " + Workload("kernels.py"));
  ASSERT_EQ(idle.status, 0) << idle.output;
  EXPECT_EQ(ReadFile(dir + "/idle.txt").rfind("delivered=0 activity=0 kernels=0/", 0), 0u) << ReadFile(dir + "/idle.txt");
  // 4 s of a launch a millisecond: the priming records a tick or a few of
  // them (under a loaded CI, up to a second), not the run; unprimed, none.
  for (const bool prime : {true, false}) {
    const std::string report = dir + (prime ? "/steady.txt" : "/unprimed.txt");
    RunResult steady = Sh(SimEnv() + " CUDA_INJECTION64_PATH=" + lib + " GF_SIM_CUPTI_REPORT=" + report +
                          " GPUFLAME_LAUNCH_ROUTE_PRIME=" + (prime ? "1 " : "0 ") + PyenvPython("3.12") + " " +
                          Workload("steady_kernels.py") + " 4");
    ASSERT_EQ(steady.status, 0) << steady.output;
    const auto [recorded, run] = KernelsRecordedAndRun(ReadFile(report));
    const int64_t records = ApiRecordsMade(ReadFile(report));
    EXPECT_EQ(recorded, 0) << ReadFile(report);
    EXPECT_GT(run, 1000) << ReadFile(report);
    if (prime) {
      EXPECT_GT(records, 0) << ReadFile(report);
      EXPECT_LT(records, run / 2) << ReadFile(report);
    } else {
      EXPECT_EQ(records, 0) << ReadFile(report);
    }
  }
  RunResult traced = RecordKernels(dir + "/out", "GF_SIM_CUPTI_REPORT=" + dir + "/traced.txt");
  ASSERT_EQ(traced.status, 0) << traced.output;
  EXPECT_NE(ReadFile(dir + "/traced.txt").find("activity=1"), std::string::npos) << ReadFile(dir + "/traced.txt");
  EXPECT_EQ(ReadFile(dir + "/traced.txt").find("delivered=0 "), std::string::npos);
}

TEST(KernelTimeTest, SampledActivityIsScaledToAnEstimateAndTheProfileSaysWhatWasSeen) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string dir = TempDir("kernels-duty");
  // Its own copy of the library (see TheLibraryCostsOnlyItsPrimingUntilAnAgentAttaches):
  // an earlier exact session still letting go of the build's copy would hold
  // its gpuflame:kernel_time_exact semaphore up.
  std::string lib = dir + "/libgpuflame_cupti.so";
  std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib);
  // Activity on 0.2 s in every 0.8 s (one period in four), nothing seen
  // whole at start-up: the agent's mode, made short enough for a test.
  RunResult r = Sh(SimEnv() + " CUDA_INJECTION64_PATH=" + lib + " GPUFLAME_STARTUP_S=0 GPUFLAME_ACTIVITY_ON_S=0.2 GPUFLAME_ACTIVITY_ONE_IN=4 GF_SIM_CUPTI_REPORT=" +
                   dir + "/report.txt " + GPUFLAME_BIN + " record -q --kernel-activity sampled -o " + dir + "/out -- " +
                   PyenvPython("3.12") + " " + Workload("steady_kernels.py") + " 6");
  ASSERT_EQ(r.status, 0) << r.output;
  auto [recorded, run] = KernelsRecordedAndRun(ReadFile(dir + "/report.txt"));
  ASSERT_GT(run, 1000) << ReadFile(dir + "/report.txt");
  // The simulated GPU timed about a quarter of the kernels...
  EXPECT_GT(recorded, run / 8) << recorded << " of " << run;
  EXPECT_LT(recorded, run / 2) << recorded << " of " << run;
  pprof::Profile k;
  ASSERT_TRUE(LoadPprof(dir + "/out/gpu_kernel.pb.gz", &k)) << r.output;
  // ...each standing for four: the estimate is what ran, within the noise
  // of where the windows fell (not 1/4 of it, as unscaled records would be).
  ASSERT_EQ(k.sample_type_size(), 3);
  EXPECT_EQ(k.string_table(k.sample_type(2).type()), "observed_time");
  const int64_t launches = Total(k, "launches");
  EXPECT_EQ(launches, 4 * recorded);
  EXPECT_GT(launches, run * 6 / 10) << launches << " estimated, " << run << " ran";
  EXPECT_LT(launches, run * 14 / 10) << launches << " estimated, " << run << " ran";
  EXPECT_EQ(Total(k, "time"), launches * 300 * kUs);
  EXPECT_EQ(Total(k, "observed_time"), recorded * 300 * kUs);
  auto time = Stacks(k, "time", true, true);
  EXPECT_EQ(time["<module>;run_until;Trainer > step;launch;" + kGemm], Total(k, "time")) << Dump(time);
  bool said = false;
  for (int64_t c : k.comment()) said |= k.string_table(c).find("observed, scaled up") != std::string::npos;
  EXPECT_TRUE(said);
  std::string summary = ReadFile(dir + "/out/summary.json");
  EXPECT_NE(summary.find("\"activity\": \"sampled\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"weighted_records\": " + std::to_string(recorded)), std::string::npos) << summary;
  // The library said what it cost the workload (its callbacks and its thread).
  EXPECT_NE(summary.find("\"library\": {\"processes\": 1, \"ns_total\": "), std::string::npos) << summary;
  EXPECT_EQ(summary.find("\"cupti_callback_ns\": 0,"), std::string::npos) << summary;
}

TEST(KernelTimeTest, RecordSeesEveryKernelAndTheLibraryStopsWhenItLeaves) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string dir = TempDir("kernels-leave");
  std::string lib =
      dir + "/libgpuflame_cupti.so";  // its own copy: see TheLibraryCostsOnlyItsPrimingUntilAnAgentAttaches
  std::filesystem::copy_file(GPUFLAME_CUPTI_LIB, lib);
  // Started without gpuflame, the library loaded; gpuflame attaches for
  // 2 s and leaves; the workload runs 7 s more (the kernel lets go of a
  // session's uprobes, and so of the semaphores, about 2 s after it exits,
  // longer on a loaded machine).
  RunResult p = Sh("cd " + dir + " && (" + SimEnv() + " GPUFLAME_STARTUP_S=0 CUDA_INJECTION64_PATH=" + lib +
                   " GF_SIM_CUPTI_REPORT=" + dir + "/report.txt " + PyenvPython("3.12") + " " +
                   Workload("steady_kernels.py") + " 7 pid go stop & ) && for i in $(seq 100); do [ -f pid ] && break; sleep 0.05; done; " +
                   GPUFLAME_BIN + " record -q -d 2 -o out -p $(cat pid) & sleep 0.5; touch " + dir +
                   "/go; wait; touch " + dir + "/stop; while kill -0 $(cat " + dir + "/pid) 2>/dev/null; do sleep 0.1; done");
  std::string report = ReadFile(dir + "/report.txt");
  EXPECT_EQ(report.find("activity=0"), report.find("activity=")) << "off once gpuflame left: " << report << p.output;
  auto [recorded, run] = KernelsRecordedAndRun(report);
  ASSERT_GT(run, 1000) << report;
  EXPECT_GT(recorded, 0) << report;
  EXPECT_LT(recorded, run * 8 / 10) << "only while gpuflame was there: " << report;
  pprof::Profile k;
  ASSERT_TRUE(LoadPprof(dir + "/out/gpu_kernel.pb.gz", &k)) << p.output;
  // Exact mode (record's): every kernel timed while attached, none weighted.
  EXPECT_EQ(k.sample_type_size(), 2);
  EXPECT_GT(Total(k, "launches"), 200);
  EXPECT_NE(ReadFile(dir + "/out/summary.json").find("\"weighted_records\": 0,"), std::string::npos);
}

// record -d on processes that run on: the library flushes only every
// GPUFLAME_FLUSH_MS (here never, within the test), so without the ask at
// the end (gpuflame:flushed) not one kernel record would come. Two
// processes map the same library file, whose probes (record's default)
// are the file's: the one attach asks both.
TEST(KernelTimeTest, RecordEndingBeforeItsProcessesGetsTheLibrarysLastRecords) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string dir = TempDir("kernels-last-flush");
  auto start = [&](const std::string& name) {
    return "(" + SimEnv() +
           " GPUFLAME_STARTUP_S=0 GPUFLAME_FLUSH_MS=600000 CUDA_INJECTION64_PATH=" + GPUFLAME_CUPTI_LIB + " " +
           PyenvPython("3.12") + " " + Workload("steady_kernels.py") + " 6 " + name + " go & ); ";
  };
  RunResult p = Sh("cd " + dir + " && " + start("a") + start("b") +
                   "for i in $(seq 100); do [ -f a ] && [ -f b ] && break; sleep 0.05; done; touch go; " +
                   GPUFLAME_BIN + " record -q -d 2 -o out -p $(cat a) -p $(cat b); echo rc=$?; kill $(cat a) $(cat b)");
  ASSERT_NE(p.output.find("rc=0"), std::string::npos) << p.output;
  auto json = nlohmann::json::parse(ReadFile(dir + "/out/summary.json"), nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << p.output;
  const auto& flush = json["library_flush"];
  EXPECT_EQ(flush["asked"], 2) << flush;
  EXPECT_EQ(flush["answered"], 2) << flush;
  EXPECT_EQ(flush["unanswered"], 0) << flush;
  EXPECT_LT(flush["wait_ms"].get<int64_t>(), 2000) << flush;
  // A kernel a millisecond in each for some 2 s, every one timed (exact),
  // each record on its launch's stack.
  const auto& kernels = json["gpu_kernels"];
  EXPECT_GT(kernels["activity_records"].get<int64_t>(), 2000) << kernels;
  EXPECT_GT(kernels["joined"].get<int64_t>(), 100) << kernels;
  pprof::Profile k;
  ASSERT_TRUE(LoadPprof(dir + "/out/gpu_kernel.pb.gz", &k)) << p.output;
  int64_t under_step = 0;
  for (const auto& [stack, v] : Stacks(k, "time", true, true))
    if (stack.find("Trainer > step") != std::string::npos) under_step += v;
  EXPECT_GE(under_step, Total(k, "time") * 9 / 10) << Dump(Stacks(k, "time", true, true));
  EXPECT_GT(under_step, 0);
}

TEST(KernelTimeTest, StepsAsideForAnotherCuptiClientAndSaysSo) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string out = TempDir("kernels-busy");
  RunResult r = RecordKernels(out, "GF_SIM_CUPTI_BUSY=1");  // the fixture plays torch.profiler
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("another CUPTI client"), std::string::npos) << r.output;
  std::string summary = ReadFile(out + "/summary.json");
  EXPECT_NE(summary.find("stepped aside"), std::string::npos) << summary;
  // Memory and CPU profiles are unaffected.
  pprof::Profile gpu, cpu;
  EXPECT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu));
  EXPECT_TRUE(LoadPprof(out + "/process_cpu.pb.gz", &cpu));
}

TEST(KernelTimeTest, WithoutTheLibraryEverythingElseFlowsAndItIsSaidOnce) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("kernels-off");
  RunResult r = RecordKernels(out, "", "--no-kernel-time");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out + "/gpu_kernel.pb.gz"));
  EXPECT_EQ(ReadFile(out + "/summary.json").find("kernel time unavailable"), std::string::npos)
      << "asked not to: no warning";
  // Attached by --pid to a process started without the library: one warning.
  std::string dir = TempDir("kernels-pid");
  RunResult p = Sh("cd " + dir + " && (" + SimEnv() + " " + PyenvPython("3.12") + " " + Workload("steady.py") +
                   " pid go & ) && for i in $(seq 100); do [ -f pid ] && break; sleep 0.05; done; " + GPUFLAME_BIN +
                   " record -q -d 1 -o out -p $(cat pid) & sleep 0.5; touch " + dir + "/go; wait; kill $(cat " + dir +
                   "/pid)");
  std::string summary = ReadFile(dir + "/out/summary.json");
  size_t first = summary.find("kernel time unavailable");
  EXPECT_NE(first, std::string::npos) << summary << p.output;
  EXPECT_EQ(summary.find("kernel time unavailable", first + 1), std::string::npos) << "once: " << summary;
}

}  // namespace
}  // namespace gpuflame::e2e
