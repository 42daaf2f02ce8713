#include "inprocess/oom_report.h"

#include <atomic>

#include "inprocess/got_hook.h"
#include "inprocess/tensor_events.h"

namespace gpuflame::inprocess {
namespace {

constexpr int8_t kCudaDeviceType = 1;  // c10::DeviceType::CUDA

struct State {
  std::atomic<TorchOomFn> original{nullptr};
  // Flusher thread only:
  bool hooked = false;
  bool tried = false;
  GotHookResult patch;
};

State& S() {
  static State* s = new State();  // never destroyed: an allocation may fail during exit
  return *s;
}

void OomHook(int64_t alloc_size, size_t allocated, size_t reserved, TorchDevice device) {
  S().original.load(std::memory_order_acquire)(alloc_size, allocated, reserved, device);
  if (device.type == kCudaDeviceType) SendOomReport(static_cast<uint64_t>(alloc_size), allocated, reserved, device);
}

}  // namespace

void PollOomReport() {
  State& s = S();
  if (s.hooked) {
    for (int i = 0; i < s.patch.slots && i < kMaxGotSlots; i++)
      RestoreGotSlot(s.patch.slot[i], reinterpret_cast<void*>(&OomHook));
    return;
  }
  // Once libc10_cuda.so is hooked for tensor events, its GOT has the slot
  // or never will: looked for once.
  if (s.tried || !TensorHookLive()) return;
  s.tried = true;
  for (const char* symbol : {GF_TORCH_OOM_SYMBOL, GF_TORCH_OOM_SYMBOL_UNSIGNED}) {
    GotHookResult r = HookGot(kTorchCudaLibrary, symbol, reinterpret_cast<void*>(&OomHook), [](void* original) {
      S().original.store(reinterpret_cast<TorchOomFn>(original), std::memory_order_release);
    });
    if (r.slots > 0) {
      s.patch = r;
      s.hooked = true;
      return;
    }
  }
}

}  // namespace gpuflame::inprocess
