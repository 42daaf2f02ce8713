// Which processes `gpuflame record --per-process-probes` touches: the ones
// it follows, each from its first instruction (a child forked without exec
// included), and no other. Real BPF on the simulated CUDA runtime (a test
// fixture, not a GPU).
#include <gtest/gtest.h>

#include <cstdio>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t MiB = 1 << 20;

// The bytes of every stack that runs through |frames| ("a;b", adjacent).
int64_t Under(const std::map<std::string, int64_t>& stacks, const std::string& frames) {
  int64_t sum = 0;
  for (const auto& [stack, value] : stacks)
    if ((";" + stack + ";").find(";" + frames + ";") != std::string::npos) sum += value;
  return sum;
}

bool WaitForFile(const std::string& path, int seconds) {
  for (int i = 0; i < seconds * 100 && !std::filesystem::exists(path); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return std::filesystem::exists(path);
}

// multiprocessing's fork start method: each worker allocates in its first
// statements after fork(), before gpuflame could attach anything if the
// child ran on. Per-process probes are not inherited, so the child waits
// at its first return from fork() until its own are in place.
TEST(FollowTest, WorkersForkedWithoutExecAreSeenFromTheirFirstAllocation) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  const std::string out = TempDir("forked-workers");
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q --per-process-probes -o " + out + " -- " +
                   PyenvPython("3.12") + " " + Workload("forked_workers.py") + " 4");
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile gpu, torch;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &gpu)) << r.output;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch)) << r.output;
  auto device = Stacks(gpu, "alloc_space", true, /*drop_native=*/true);
  auto tensors = Stacks(torch, "alloc_space");
  EXPECT_EQ(Under(device, "load;cuda_malloc"), 2 * MiB) << Dump(device);
  EXPECT_EQ(Under(device, "Worker > run;cuda_malloc"), 4 * 3 * MiB) << Dump(device) << r.output;
  EXPECT_EQ(Under(tensors, "load;empty"), 8 * MiB) << Dump(tensors);
  EXPECT_EQ(Under(tensors, "Worker > run;empty"), 4 * MiB) << Dump(tensors) << r.output;
  // Each worker was held at its fork for its probes, and said so.
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(out + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << r.output;
  EXPECT_GE(summary["gates"]["held"].get<int64_t>(), 4) << summary["gates"].dump();
}

// A job beside the recording maps the same libraries: it must run as if
// gpuflame were not there, no breakpoint in its code (a trap per call) and
// no semaphore raised (the injection library's work switched on).
TEST(FollowTest, AProcessOutsideTheRecordingGetsNoBreakpointAndNoSemaphore) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const std::string dir = TempDir("bystander");
  const std::string env = SimEnv() + " CUDA_INJECTION64_PATH=" + GPUFLAME_CUPTI_LIB + " ";
  const std::string python = PyenvPython("3.12");
  const std::string beside = dir + "/beside.json", stop = dir + "/stop";
  Sh(env + "timeout 60 " + python + " " + Workload("bystander.py") + " " + beside + " " + stop + " 30 > " + dir +
     "/beside.log 2>&1 &");
  ASSERT_TRUE(WaitForFile(beside + ".ready", 20)) << ReadFile(dir + "/beside.log");

  const std::string inside = dir + "/inside.json";
  RunResult r = Sh(env + GPUFLAME_BIN + " record -q --per-process-probes -o " + dir + "/out -- " + python + " " +
                   Workload("bystander.py") + " " + inside + " - 1.5");
  Sh("touch " + stop);
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(WaitForFile(beside, 20)) << ReadFile(dir + "/beside.log");
  const nlohmann::json in = nlohmann::json::parse(ReadFile(inside), nullptr, false);
  const nlohmann::json out = nlohmann::json::parse(ReadFile(beside), nullptr, false);
  ASSERT_TRUE(in.is_object() && out.is_object()) << r.output << ReadFile(dir + "/beside.log");
  // What the check can see: the recorded process has both.
  EXPECT_TRUE(in["breakpoint"].get<bool>()) << in.dump();
  EXPECT_GE(in["semaphore_max"].get<int>(), 1) << in.dump();
  // And the process beside it neither, over the whole recording.
  EXPECT_GT(out["samples"].get<int>(), 100) << out.dump();
  EXPECT_NE(out["original_byte"].get<int>(), 0xcc) << out.dump();
  EXPECT_FALSE(out["breakpoint"].get<bool>()) << out.dump();
  EXPECT_EQ(out["semaphore_max"].get<int>(), 0) << out.dump();
}

// Record's uprobes leave with it (issue 11): a process started as record
// returns finds no breakpoint in its code and no USDT semaphore raised (the
// injection library's work switched on). Made as perf events, each probe
// was removed after its own grace periods, one after another, seconds after
// record had returned, and every process that ran meanwhile trapped; as
// uprobe_multi links (profiler/probes/uprobe_multi.h), USDT sites included
// (BpfProbes::AttachUsdt), they go at once, in record's exit.
TEST(FollowTest, AProcessStartedAsRecordReturnsFindsNoBreakpoint) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const std::string dir = TempDir("after_record");
  const std::string env = SimEnv() + " CUDA_INJECTION64_PATH=" + GPUFLAME_CUPTI_LIB + " ";
  const std::string python = PyenvPython("3.12");
  for (const char* probes : {"", "--per-process-probes"}) {
    const std::string inside = dir + "/inside.json", after = dir + "/after.json";
    std::remove(inside.c_str());
    std::remove(after.c_str());
    // The second process starts once the first command has returned.
    RunResult r = Sh(env + GPUFLAME_BIN + " record -q " + probes + " -o " + dir + "/out -- " + python + " " +
                     Workload("bystander.py") + " " + inside + " - 1 && " + env + python + " " +
                     Workload("bystander.py") + " " + after + " - 0.3");
    ASSERT_EQ(r.status, 0) << probes << r.output;
    const nlohmann::json in = nlohmann::json::parse(ReadFile(inside), nullptr, false);
    const nlohmann::json out = nlohmann::json::parse(ReadFile(after), nullptr, false);
    ASSERT_TRUE(in.is_object() && out.is_object()) << probes << r.output;
    EXPECT_TRUE(in["breakpoint"].get<bool>()) << probes << in.dump();
    EXPECT_GE(in["semaphore_max"].get<int>(), 1) << probes << in.dump();
    EXPECT_GT(out["samples"].get<int>(), 10) << probes << out.dump();
    EXPECT_NE(out["original_byte"].get<int>(), 0xcc) << probes << out.dump();
    EXPECT_FALSE(out["breakpoint"].get<bool>()) << probes << out.dump();
    EXPECT_EQ(out["semaphore_max"].get<int>(), 0) << probes << out.dump();
  }
}

}  // namespace
}  // namespace gpuflame::e2e
