// inprocess/got_hook on a real library: the simulated libc10_cuda.so calls
// c10::reportMemoryUsageToProfiler (in libc10.so) through its GOT, as
// PyTorch's does. Own binary: it links only what the injection library links.
#include "inprocess/got_hook.h"
#include "inprocess/torch_report.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace gpuflame::inprocess {
namespace {

std::atomic<TorchReportFn> original{nullptr};
std::atomic<int> hooked_calls{0};
std::atomic<int64_t> last_delta{0};

void Hook(void* ptr, int64_t delta, size_t allocated, size_t reserved, TorchDevice device) {
  hooked_calls++;
  last_delta = delta;
  original.load()(ptr, delta, allocated, reserved, device);
}

TEST(GotHookTest, RedirectsOneLibrarysCallsAndRestoresAfterARebind) {
  void* lib = dlopen((std::string(GPUFLAME_SIM_DIR) + "/libc10_cuda.so").c_str(), RTLD_NOW);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto empty = reinterpret_cast<void* (*)(size_t, int)>(dlsym(lib, "gf_sim_empty"));
  auto free_ = reinterpret_cast<void (*)(void*, int)>(dlsym(lib, "gf_sim_free"));
  ASSERT_TRUE(empty && free_);

  GotHookResult r = HookGot(kTorchCudaLibrary, kTorchReportSymbol, reinterpret_cast<void*>(&Hook),
                            [](void* o) { original = reinterpret_cast<TorchReportFn>(o); });
  ASSERT_GE(r.slots, 1) << r.error;
  ASSERT_NE(original.load(), nullptr);
  void* p = empty(4096, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(hooked_calls, 1);
  EXPECT_EQ(last_delta, 4096);
  free_(p, 0);
  EXPECT_EQ(hooked_calls, 2);
  EXPECT_EQ(last_delta, -4096);

  // Something (lazy binding racing the patch) writes the original back: the
  // slot is restored, once.
  ASSERT_TRUE(RestoreGotSlot(r.slot[0], reinterpret_cast<void*>(original.load())));  // as the loader would
  free_(empty(512, 0), 0);
  EXPECT_EQ(hooked_calls, 2) << "calls went around the hook";
  EXPECT_TRUE(RestoreGotSlot(r.slot[0], reinterpret_cast<void*>(&Hook)));
  EXPECT_FALSE(RestoreGotSlot(r.slot[0], reinterpret_cast<void*>(&Hook)));
  free_(empty(512, 0), 0);
  EXPECT_EQ(hooked_calls, 4);
}

TEST(GotHookTest, SaysWhyWhenThereIsNothingToHook) {
  GotHookResult none =
      HookGot("libnot_loaded_anywhere.so", kTorchReportSymbol, reinterpret_cast<void*>(&Hook), [](void*) {});
  EXPECT_EQ(none.slots, 0);
  EXPECT_NE(none.error.find("is not loaded"), std::string::npos) << none.error;
}

}  // namespace
}  // namespace gpuflame::inprocess
