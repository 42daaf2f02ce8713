// Backward attributed to its Python caller, end to end: `gpuflame record`
// on tests/workloads/backward.py, whose backward() runs on the simulated
// libtorch (test fixture: libtorch_python.so calls
// torch::autograd::Engine::execute through its GOT, and an engine thread
// `pt_autograd_0`, with an idle Python thread state as PyTorch gives it,
// allocates and launches). Real eBPF,
// real CPython of every supported shape, the real libgpuflame_cupti.so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include <nlohmann/json.hpp>

#include "e2e/e2e_support.h"

namespace gpuflame::e2e {
namespace {

constexpr int64_t MiB = 1 << 20;
constexpr int64_t kUs = 1000;
const std::string kLeaf = "c10::cuda::CUDACachingAllocator::malloc";
const std::string kKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::MulBackward>(int, at::native::MulBackward)";
const std::string kEngine = "<autograd engine>";
const std::string kAmbiguous = "<autograd engine: 2 concurrent backward calls>";

// Sum of the stacks ending with |suffix| (at a frame boundary).
int64_t EndingWith(const std::map<std::string, int64_t>& stacks, const std::string& suffix) {
  int64_t v = 0;
  for (const auto& [stack, value] : stacks)
    if (stack == suffix || (stack.size() > suffix.size() && stack.ends_with(";" + suffix))) v += value;
  return v;
}

class BackwardOriginTest : public InterpreterTest {};

TEST_P(BackwardOriginTest, EngineThreadWorkLandsUnderTheCallerOfBackward) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_KERNEL_TIME();
  const Interpreter& py = GetParam();
  std::string out = TempDir("backward-" + py.label);
  // Every launch's stack: kernel time is then exact per stack.
  RunResult r = Sh(SimEnv() + " GPUFLAME_LAUNCH_STACKS_PER_S=0 " + GPUFLAME_BIN + " record -q -o " + out + " -- " +
                   py.path + " " + Workload("backward.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch, kernels;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  ASSERT_TRUE(LoadPprof(out + "/gpu_kernel.pb.gz", &kernels));
  auto alloc = Stacks(torch, "alloc_space");
  auto inuse = Stacks(torch, "inuse_space");
  const std::string step = "<module>;main;Trainer > step;";

  // The forward, on the Python thread, as always.
  EXPECT_EQ(alloc[step + "empty;Tensor > __init__;" + kLeaf], 32 * MiB) << Dump(alloc);
  // The engine thread's allocations, under the stack that called backward().
  EXPECT_EQ(alloc[step + "backward;" + kEngine + ";" + kLeaf], 2 * 2 * 4 * MiB) << Dump(alloc);
  EXPECT_EQ(inuse[step + "backward;" + kEngine + ";" + kLeaf], 2 * 4 * MiB) << Dump(inuse);
  // A backward() whose engine threw: attributed while it ran ...
  EXPECT_EQ(alloc["<module>;main;Trainer > failing_step;backward;" + kEngine + ";" + kLeaf], 2 * 2 * MiB)
      << Dump(alloc);
  // ... and no longer once it unwound: the engine thread's work outside any
  // backward() call (before and after it) names no caller.
  EXPECT_EQ(alloc[kLeaf], 2 * 1 * MiB + 2 * 3 * MiB) << Dump(alloc);
  EXPECT_EQ(inuse[kLeaf], 1 * MiB + 3 * MiB) << Dump(inuse);
  // Two threads in backward() at once: the work that ran while both did is
  // not given to either; any that ran alone is its caller's.
  const int64_t ambiguous = alloc[kAmbiguous + ";" + kLeaf];
  const int64_t workers = EndingWith(alloc, "Worker > run;backward;" + kEngine + ";" + kLeaf);
  EXPECT_GE(ambiguous, 2 * 5 * MiB) << Dump(alloc);
  EXPECT_EQ(ambiguous + workers, 2 * 2 * 5 * MiB) << Dump(alloc);
  EXPECT_EQ(Total(torch, "alloc_space"), (32 + 16 + 4 + 8 + 20) * MiB) << Dump(alloc);
  // Nothing else got the engine frame.
  for (const auto& [stack, v] : alloc) {
    if (stack.find("<autograd engine") == std::string::npos) continue;
    EXPECT_TRUE(stack.starts_with(step + "backward;") || stack.find("failing_step;backward;") != std::string::npos ||
                stack.find("Worker > run;backward;") != std::string::npos || stack.starts_with(kAmbiguous))
        << stack;
  }

  // Kernel time: launched on the engine thread, charged below the caller
  // (the engine thread's native frames follow the engine frame).
  auto time = Stacks(kernels, "time", true, /*drop_native=*/true);
  EXPECT_EQ(time[step + "backward;" + kEngine + ";" + kKernel], 2 * 5 * 200 * kUs) << Dump(time);
  EXPECT_EQ(time[kKernel], 3 * 100 * kUs) << "launched outside backward(): no caller\n" << Dump(time);
  EXPECT_EQ(Total(kernels, "time"), 2 * 5 * 200 * kUs + 3 * 100 * kUs) << Dump(time);
  auto full = Stacks(kernels, "time");
  bool native_below = false;
  for (const auto& [stack, v] : full)
    native_below |= stack.find(kEngine + ";") != std::string::npos && stack.ends_with(";cudaLaunchKernel;" + kKernel);
  EXPECT_TRUE(native_below) << Dump(full);

  auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  const auto& in = summary["inprocess"];
  EXPECT_EQ(in["autograd_events"].get<int>() + in["autograd_events_ambiguous"].get<int>(), 2 * 2 + 2 + 2 * 2)
      << in.dump();
  EXPECT_GE(in["autograd_events_ambiguous"].get<int>(), 2) << in.dump();
  EXPECT_EQ(in["autograd_launches"], 10) << in.dump();
  EXPECT_EQ(in["autograd_unknown_origins"], 0) << in.dump();
  EXPECT_EQ(in["events_with_unknown_stack"], 0) << in.dump();
  int live = 0;
  for (const auto& p : summary["processes"]) live += p.value("autograd_hook", "") == "live";
  EXPECT_EQ(live, 1) << summary.dump();
  EXPECT_TRUE(summary["warnings"].empty()) << summary.dump();
}

// Without the library's hooks (tensor events through the probes, no kernel
// time): BPF finds the same caller (bpf/lib/backward_callers.bpf.h), and an
// engine thread's allocation made while no single backward() call runs is
// unwound from a stack copy, never from garbage frame pointers.
TEST_P(BackwardOriginTest, ProbesLendTheCallersStackWithoutTheLibrary) {
  GPUFLAME_REQUIRE_ROOT();
  const Interpreter& py = GetParam();
  std::string out = TempDir("backward-probes-" + py.label);
  RunResult r = Sh(SimEnv() + " " + GPUFLAME_BIN + " record -q --tensor-events probes --no-kernel-time -o " + out +
                   " -- " + py.path + " " + Workload("backward.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  auto alloc = Stacks(torch, "alloc_space");
  auto inuse = Stacks(torch, "inuse_space");
  const std::string step = "<module>;main;Trainer > step;";
  EXPECT_EQ(alloc[step + "empty;Tensor > __init__;" + kLeaf], 32 * MiB) << Dump(alloc);
  EXPECT_EQ(alloc[step + "backward;" + kEngine + ";" + kLeaf], 2 * 2 * 4 * MiB) << Dump(alloc);
  EXPECT_EQ(inuse[step + "backward;" + kEngine + ";" + kLeaf], 2 * 4 * MiB) << Dump(inuse);
  // Lent while the call ran, no longer once its exception unwound it.
  EXPECT_EQ(alloc["<module>;main;Trainer > failing_step;backward;" + kEngine + ";" + kLeaf], 2 * 2 * MiB)
      << Dump(alloc);
  int64_t ambiguous = 0, workers = 0, alone = 0;
  for (const auto& [stack, v] : alloc) {
    if (stack.starts_with(kAmbiguous + ";")) ambiguous += v;
    if (stack.find("Worker > run;backward;" + kEngine + ";") != std::string::npos) workers += v;
    if (stack.find("<module>") == std::string::npos && stack.find("<autograd engine") == std::string::npos) {
      alone += v;
      // The engine thread's own frames, unwound: no raw garbage words.
      EXPECT_TRUE(stack.ends_with(";" + kLeaf)) << stack;
      EXPECT_EQ(stack.find(";0x"), std::string::npos) << stack;
      EXPECT_FALSE(stack.starts_with("0x")) << stack;
    }
  }
  EXPECT_GE(ambiguous, 2 * 5 * MiB) << Dump(alloc);
  EXPECT_EQ(ambiguous + workers, 2 * 2 * 5 * MiB) << Dump(alloc);
  EXPECT_EQ(alone, 2 * 1 * MiB + 2 * 3 * MiB) << Dump(alloc);
  EXPECT_EQ(Total(torch, "alloc_space"), (32 + 16 + 4 + 8 + 20) * MiB) << Dump(alloc);

  auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_EQ(summary["inprocess"]["events"], 0) << summary["inprocess"].dump();
  const auto& lent = summary["backward_callers_lent"];
  // The tensor allocations above, and the device-level calls the engine
  // thread's caching allocator made for them (their number is its business).
  EXPECT_GE(lent["allocations"].get<int>() + lent["allocations_ambiguous"].get<int>(), 2 * 2 + 2 + 2 * 2)
      << lent.dump();
  pprof::Profile device;
  ASSERT_TRUE(LoadPprof(out + "/gpu_memory.pb.gz", &device));
  int64_t device_lent = 0;
  for (const auto& [stack, v] : Stacks(device, "alloc_space"))
    if (stack.starts_with(step + "backward;" + kEngine + ";") && stack.ends_with(";cudaMalloc")) device_lent += v;
  EXPECT_GT(device_lent, 0) << Dump(Stacks(device, "alloc_space"));
  EXPECT_EQ(summary["bpf"]["backward_calls"], 2 + 1 + 2) << summary["bpf"].dump();
  EXPECT_EQ(summary["bpf"]["backward_calls_untracked"], 0) << summary["bpf"].dump();
}

TEST(BackwardOriginTest, AWorkerThreadWithoutAnyPythonStateIsAttributedToo) {
  // PyTorch's engine threads hold an idle Python thread state; a plain
  // native worker (GF_SIM_ENGINE_NO_PYTHON=1) holds none: both run no Python.
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string out = TempDir("backward-no-state");
  RunResult r = Sh(SimEnv() + " GF_SIM_ENGINE_NO_PYTHON=1 GPUFLAME_LAUNCH_STACKS_PER_S=0 " + GPUFLAME_BIN +
                   " record -q -o " + out + " -- " + PyenvPython("3.12") + " " + Workload("backward.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch, kernels;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  ASSERT_TRUE(LoadPprof(out + "/gpu_kernel.pb.gz", &kernels));
  auto alloc = Stacks(torch, "alloc_space");
  EXPECT_EQ(alloc["<module>;main;Trainer > step;backward;" + kEngine + ";" + kLeaf], 2 * 2 * 4 * MiB) << Dump(alloc);
  EXPECT_EQ(alloc[kLeaf], 2 * 1 * MiB + 2 * 3 * MiB) << Dump(alloc);
  auto time = Stacks(kernels, "time", true, /*drop_native=*/true);
  EXPECT_EQ(time["<module>;main;Trainer > step;backward;" + kEngine + ";" + kKernel], 2 * 5 * 200 * kUs) << Dump(time);
}

// The launch route (--launch-stacks uprobes): no CUPTI callback, so the
// library's origin does not come with the launch; its uprobe's BPF lends
// the caller from Engine::execute's entry probe, as for the probes' events.
TEST(BackwardOriginTest, TheLaunchRouteChargesEngineThreadLaunchesToTheCaller) {
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  GPUFLAME_REQUIRE_KERNEL_TIME();
  std::string out = TempDir("backward-route");
  RunResult r =
      Sh(SimEnv() + " GPUFLAME_LAUNCH_STACKS_PER_S=0 " + GPUFLAME_BIN + " record -q --launch-stacks uprobes -o " + out +
         " -- " + PyenvPython("3.12") + " " + Workload("backward.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile kernels;
  ASSERT_TRUE(LoadPprof(out + "/gpu_kernel.pb.gz", &kernels));
  auto time = Stacks(kernels, "time", true, /*drop_native=*/true);
  EXPECT_EQ(time["<module>;main;Trainer > step;backward;" + kEngine + ";" + kKernel], 2 * 5 * 200 * kUs) << Dump(time);
  EXPECT_EQ(time[kKernel], 3 * 100 * kUs) << "launched outside backward(): no caller\n" << Dump(time);
  auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  const auto& route = summary["gpu_kernels"]["launch_route"];
  EXPECT_EQ(route["hits"], 13) << route.dump();
  EXPECT_EQ(route["joined"], 13) << route.dump();
}

TEST(BackwardOriginTest, AnotherEngineExecuteSignatureIsLeftAloneAndSaidOnce) {
  // The simulated libtorch built with PyTorch 1.x's Engine::execute (no
  // accumulate_grad): a hook would misread its registers, so there is none.
  GPUFLAME_REQUIRE_ROOT();
  GPUFLAME_REQUIRE_PYTHON("3.12");
  std::string out = TempDir("backward-othersig");
  RunResult r = Sh(SimEnv() + " GPUFLAME_SIM_TORCH_DIR=" + GPUFLAME_SIM_DIR + "/othersig " + GPUFLAME_BIN +
                   " record -q -o " + out + " -- " + PyenvPython("3.12") + " " + Workload("backward.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  pprof::Profile torch;
  ASSERT_TRUE(LoadPprof(out + "/torch_memory.pb.gz", &torch));
  auto alloc = Stacks(torch, "alloc_space");
  for (const auto& [stack, v] : alloc) EXPECT_EQ(stack.find("<autograd engine"), std::string::npos) << stack;
  // The engine thread's work, all of it, without a caller; the forward as before.
  EXPECT_EQ(alloc[kLeaf], (16 + 4 + 8 + 20) * MiB) << Dump(alloc);
  EXPECT_EQ(alloc["<module>;main;Trainer > step;empty;Tensor > __init__;" + kLeaf], 32 * MiB) << Dump(alloc);
  auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  int other = 0;
  for (const auto& p : summary["processes"]) other += p.value("autograd_hook", "") == "other signature";
  EXPECT_EQ(other, 1) << summary.dump();
  int said = 0;
  for (const auto& w : summary["warnings"])
    said += w.get<std::string>().find("Engine::execute has a signature gpuflame does not know") != std::string::npos;
  EXPECT_EQ(said, 1) << summary.dump();
}

std::string InterpreterName(const ::testing::TestParamInfo<Interpreter>& info) {
  std::string n = info.param.label;
  for (char& c : n)
    if (c == '.' || c == '-') c = '_';
  return "Python" + n;
}
INSTANTIATE_TEST_SUITE_P(AllPythons, BackwardOriginTest, ::testing::ValuesIn(SupportedInterpreters()), InterpreterName);

}  // namespace
}  // namespace gpuflame::e2e
