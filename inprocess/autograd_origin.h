// Backward attributed to its Python caller.
//
// loss.backward() releases the GIL and calls
// torch::autograd::Engine::execute (libtorch_cpu.so) from libtorch_python.so
// (THPEngine_run_backward -> PythonEngine::execute) on the calling thread,
// which blocks there, its Python frames intact, while autograd's engine
// threads (one per device, `pt_autograd_N`: an idle Python thread state of
// their own, no Python frames) allocate and
// launch the device work. That slot of libtorch_python.so's GOT is pointed
// at a hook that walks the caller's Python stack, sends it once, and
// publishes it as a running backward call (backward_origins.h) until the
// original returns or throws. The engine threads' tensor events and kernel
// launches made meanwhile carry that stack; the agent adds a synthetic
// `<autograd engine>` frame below it.
//
// Only the exact PyTorch 2.x signature is hooked (kEngineExecuteSymbol):
// the hook forwards registers it must know the meaning of. Another
// Engine::execute is left alone and reported (GF_AUTOGRAD_HOOK_OTHER_SIGNATURE).
#ifndef GPUFLAME_INPROCESS_AUTOGRAD_ORIGIN_H_
#define GPUFLAME_INPROCESS_AUTOGRAD_ORIGIN_H_

#include <cstdint>

#include "bpf/gpuflame_abi.h"
#include "inprocess/backward_origins.h"

namespace gpuflame::inprocess {

// variable_list Engine::execute(const edge_list& roots, const variable_list&
// inputs, bool keep_graph, bool create_graph, bool accumulate_grad, const
// edge_list& outputs), PyTorch 2.x (checked in 2.11's libtorch_cpu.so).
inline constexpr const char* kEngineExecuteSymbol = GF_TORCH_ENGINE_EXECUTE_SYMBOL;
// Any Engine::execute: one of another signature is reported, not hooked.
inline constexpr const char* kEngineExecutePrefix = "_ZN5torch8autograd6Engine7execute";
inline constexpr const char* kTorchPythonLibrary = "libtorch_python.so";

// At the register level (x86-64 Itanium ABI): the std::vector result is
// returned through a hidden pointer (rdi), which comes back in rax; `this`
// follows. All eight are forwarded unchanged.
using EngineExecuteFn = void* (*)(void* sret, void* self, const void* roots, const void* inputs, bool keep_graph,
                                  bool create_graph, bool accumulate_grad, const void* outputs);

// On the flusher thread, every tick once the tensor hook is live: installs
// the hook (said to the agent once), and patches the slot again if lazy
// binding wrote the original back.
void PollAutogradOrigin();

// For the launch callback (cupti/injection.cc), on the launching thread:
// the running backward call this thread works for if it has no Python
// state ({stack_id, active}: stack_id when exactly one runs, active the
// count), else {0, 0}. Two loads when no backward call runs.
BackwardOrigin BackwardOriginForThisThread();

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_AUTOGRAD_ORIGIN_H_
