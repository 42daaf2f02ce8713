#include "inprocess/autograd_origin.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "bpf/gpuflame_abi.h"
#include "inprocess/got_hook.h"
#include "inprocess/tensor_events.h"

namespace gpuflame::inprocess {
namespace {

constexpr int kRetryPolls = 10;  // polls (100 ms apart) between looks for libtorch_python.so

struct State {
  std::atomic<EngineExecuteFn> original{nullptr};
  // Flusher thread only:
  bool hooked = false;
  bool gave_up = false;  // another signature: never hooked
  bool said_not_found = false;
  int polls = 0;
  GotHookResult patch;
};

State& S() {
  static State* s = new State();  // never destroyed: a backward call may run during exit
  return *s;
}

// Publishes the calling thread's backward call for as long as it runs. A
// destructor, so that the call is removed also when Engine::execute throws
// (a backward node's error, CUDA out of memory): the exception passes
// through the hook to PyTorch's handler, which turns it into a Python one.
class RunningCall {
 public:
  RunningCall() {
    if (!TensorEventsListening()) return;
    const uint64_t stack = SendThisThreadsStack();
    slot_ = RunningBackwardCalls().Add(stack, static_cast<uint32_t>(syscall(SYS_gettid)));
    added_ = true;
  }
  ~RunningCall() {
    if (added_) RunningBackwardCalls().Remove(slot_);
  }
  RunningCall(const RunningCall&) = delete;
  RunningCall& operator=(const RunningCall&) = delete;

 private:
  bool added_ = false;
  int slot_ = -1;
};

// Not noexcept, and compiled with exceptions: unwinding runs ~RunningCall.
void* EngineExecuteHook(void* sret, void* self, const void* roots, const void* inputs, bool keep_graph,
                        bool create_graph, bool accumulate_grad, const void* outputs) {
  RunningCall call;
  return S().original.load(std::memory_order_acquire)(sret, self, roots, inputs, keep_graph, create_graph,
                                                      accumulate_grad, outputs);
}

void TryHook(State& s) {
  if (s.gave_up || (s.polls++ % kRetryPolls) != 0) return;
  GotHookResult r = HookGot(
      kTorchPythonLibrary, kEngineExecuteSymbol, reinterpret_cast<void*>(&EngineExecuteHook), [](void* original) {
        S().original.store(reinterpret_cast<EngineExecuteFn>(original), std::memory_order_release);
      });
  if (r.slots > 0) {
    s.patch = r;
    s.hooked = true;
    SayAutogradHook(GF_AUTOGRAD_HOOK_LIVE);
    return;
  }
  if (r.write_failed) {
    s.gave_up = true;
    SayAutogradHook(GF_AUTOGRAD_HOOK_PATCH_FAILED);
    return;
  }
  // Never guess at another signature's registers: say it, leave it alone.
  if (GotHasSymbolWithPrefix(kTorchPythonLibrary, kEngineExecutePrefix)) {
    s.gave_up = true;
    SayAutogradHook(GF_AUTOGRAD_HOOK_OTHER_SIGNATURE);
    return;
  }
  // Not loaded yet (or not PyTorch's Python bindings at all): looked for
  // again now and then, said once.
  if (!s.said_not_found) SayAutogradHook(GF_AUTOGRAD_HOOK_NOT_FOUND);
  s.said_not_found = true;
}

}  // namespace

void PollAutogradOrigin() {
  State& s = S();
  if (!s.hooked) {
    TryHook(s);
    return;
  }
  for (int i = 0; i < s.patch.slots && i < kMaxGotSlots; i++)
    RestoreGotSlot(s.patch.slot[i], reinterpret_cast<void*>(&EngineExecuteHook));
}

BackwardOrigin BackwardOriginForThisThread() {
  const BackwardOrigin running = RunningBackwardCalls().Current();
  if (running.active == 0 || !ThisThreadRunsNoPython()) return {};
  return running;
}

}  // namespace gpuflame::inprocess
