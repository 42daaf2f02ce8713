// The backward origin's parts that run inside the workload: the table of
// running backward() calls, and the Engine::execute hook's mechanics on the
// simulated libtorch_python.so, which calls the simulated libtorch_cpu.so's
// torch::autograd::Engine::execute (the real mangled name) through its GOT.
#include "inprocess/autograd_origin.h"
#include "inprocess/backward_origins.h"
#include "inprocess/got_hook.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace gpuflame::inprocess {
namespace {

TEST(BackwardOriginsTest, OneRunningCallIsNamedSeveralAreCounted) {
  BackwardOrigins t;
  EXPECT_EQ(t.Current().active, 0u);
  EXPECT_EQ(t.Current().stack_id, 0u);
  const int a = t.Add(0xa1, 10);
  EXPECT_EQ(t.Current().active, 1u);
  EXPECT_EQ(t.Current().stack_id, 0xa1u);
  const int b = t.Add(0xb1, 11);
  EXPECT_EQ(t.Current().active, 2u);
  EXPECT_EQ(t.Current().stack_id, 0u) << "two calls: never one of them";
  t.Remove(a);
  EXPECT_EQ(t.Current().active, 1u);
  EXPECT_EQ(t.Current().stack_id, 0xb1u);
  t.Remove(b);
  EXPECT_EQ(t.Current().active, 0u);
  EXPECT_EQ(t.generation(), 4u);
}

TEST(BackwardOriginsTest, CallsBeyondTheSlotsStillCount) {
  BackwardOrigins t;
  std::vector<int> slots;
  for (int i = 0; i < BackwardOrigins::kSlots + 2; i++) slots.push_back(t.Add(100 + i, 1));
  EXPECT_EQ(slots.back(), -1);
  EXPECT_EQ(t.Current().active, static_cast<uint32_t>(BackwardOrigins::kSlots + 2));
  // Every call but one ends: the one left is named (slot -1 ones hold none).
  for (int i = 1; i < static_cast<int>(slots.size()); i++) t.Remove(slots[i]);
  EXPECT_EQ(t.Current().active, 1u);
  EXPECT_EQ(t.Current().stack_id, 100u);
  t.Remove(slots[0]);
  // A call made without Python frames still counts: others are not named for it.
  const int c = t.Add(0, 1);
  const int d = t.Add(0xd1, 1);
  EXPECT_EQ(t.Current().stack_id, 0u);
  t.Remove(d);
  EXPECT_EQ(t.Current().active, 1u);
  EXPECT_EQ(t.Current().stack_id, 0u);
  t.Remove(c);
  t.Add(5, 1);
  t.ResetAfterFork();
  EXPECT_EQ(t.Current().active, 0u);
}

TEST(BackwardOriginsTest, ReadersNeverNameACallThatIsNotTheOnlyOneRunning) {
  // One caller comes and goes; another comes and goes with another stack.
  // A reader may see none, either alone, or both (unnamed), never a mix-up.
  BackwardOrigins t;
  std::atomic<bool> stop{false};
  std::atomic<long> wrong{0}, seen_one{0};
  std::thread reader([&] {
    while (!stop.load()) {
      BackwardOrigin o = t.Current();
      if (o.active == 1 && o.stack_id != 0xa1 && o.stack_id != 0xb1) wrong++;
      if (o.active > 1 && o.stack_id != 0) wrong++;
      if (o.active == 1) seen_one++;
    }
  });
  auto caller = [&](uint64_t id) {
    for (int i = 0; i < 20000; i++) t.Remove(t.Add(id, 1));
  };
  std::thread a(caller, 0xa1), b(caller, 0xb1);
  a.join();
  b.join();
  stop = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(t.Current().active, 0u);
}

// The hook's shape, on the real call: every argument forwarded, the
// result's hidden pointer returned, and an exception from the engine passes
// through with the guard's destructor run.
std::atomic<EngineExecuteFn> original{nullptr};
std::atomic<int> entered{0}, left{0};

struct Guard {
  Guard() { entered++; }
  ~Guard() { left++; }
};

void* Hook(void* sret, void* self, const void* roots, const void* inputs, bool keep_graph, bool create_graph,
           bool accumulate_grad, const void* outputs) {
  Guard g;
  return original.load()(sret, self, roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
}

TEST(AutogradOriginTest, TheSimulatedBindingsCallEngineExecuteThroughTheirGot) {
  const std::string dir = GPUFLAME_SIM_DIR;
  void* lib = dlopen((dir + "/libtorch_python.so").c_str(), RTLD_NOW);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto backward = reinterpret_cast<int (*)(size_t, int, unsigned, int, int)>(dlsym(lib, "gf_sim_backward"));
  ASSERT_NE(backward, nullptr);
  EXPECT_TRUE(GotHasSymbolWithPrefix(kTorchPythonLibrary, kEngineExecutePrefix));
  EXPECT_FALSE(GotHasSymbolWithPrefix(kTorchPythonLibrary, "_ZN5torch8autograd6Engine7executeX"));
  // Another signature is not hooked: nothing of that name resolves.
  GotHookResult other = HookGot(kTorchPythonLibrary, "_ZN5torch8autograd6Engine7executeERKSt6vectorINS0_4EdgeEE",
                                reinterpret_cast<void*>(&Hook), [](void*) {});
  EXPECT_EQ(other.slots, 0);

  GotHookResult r = HookGot(kTorchPythonLibrary, kEngineExecuteSymbol, reinterpret_cast<void*>(&Hook),
                            [](void* o) { original = reinterpret_cast<EngineExecuteFn>(o); });
  ASSERT_GE(r.slots, 1) << r.error;
  EXPECT_FALSE(r.write_failed);
  EXPECT_EQ(backward(4096, 0, 0, 0, 0), 0);
  EXPECT_EQ(entered.load(), 1);
  EXPECT_EQ(left.load(), 1);
  // The engine throws (a failed backward node): the caller still catches it,
  // and the hook's frame was unwound with its destructor.
  EXPECT_EQ(backward(4096, 0, 0, 0, /*fail=*/1), -1);
  EXPECT_EQ(entered.load(), 2);
  EXPECT_EQ(left.load(), 2);
}

}  // namespace
}  // namespace gpuflame::inprocess
