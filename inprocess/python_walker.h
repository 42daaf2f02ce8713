// The calling thread's Python stack, read from inside the process: the same
// walk as the BPF walker (bpf/lib/python_stack.bpf.h), over the same
// struct gf_py_proc layout (inspect/python_layout.cc), producing the same
// gf_py_frame records, but with plain loads instead of a trap and
// bpf_probe_read_user per read.
//
// Plain loads of interpreter memory are safe only with the right layout, so
// the layout is checked at Init (PyCode_Type's type must be PyType_Type),
// and walks are made with fault-safe reads (process_vm_readv on ourselves)
// until kChecks of them have verified real frames: every non-shim frame
// must point at a code object. A failed check or a refused safe read turns
// the walker off for good; events then carry no Python frames, and the
// agent says why. Only the calling thread's own frames are read, and only
// while the interpreter is not finalizing (which frees other threads'
// states behind their backs) and the thread state is the calling thread's:
// they cannot change or be freed while that thread is here, GIL or not.
#ifndef GPUFLAME_INPROCESS_PYTHON_WALKER_H_
#define GPUFLAME_INPROCESS_PYTHON_WALKER_H_

#include <atomic>
#include <cstdint>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::inprocess {

class PythonWalker {
 public:
  // Finds the interpreter through its exported symbols. Returns 0 when the
  // walker can run, else the enum gf_tensor_hook reason it cannot.
  uint32_t Init();
  // Walks into |frames| (GF_MAX_PY_FRAMES slots, leaf first); returns the
  // count and ORs GF_EVF_PY_* into |flags|.
  uint32_t Walk(gf_py_frame* frames, uint32_t* flags);
  // True only if the calling thread certainly runs no Python now: it has no
  // thread state, or it has its own with no frame. The second is what
  // PyTorch's autograd engine threads look like: PythonEngine::thread_init
  // creates a state for each (pybind11::gil_scoped_acquire, then releases
  // the GIL) so that Python backward nodes need not make one per call, and
  // it holds no frame while C++ nodes run. False when that cannot be told
  // (walker off, interpreter not initialised or finalizing, a read failed).
  // A few loads and a pthread_getspecific once the walker is proven;
  // fault-safe before.
  bool ThreadRunsNoPython();
  // enum gf_tensor_hook reason the walker stopped, or 0 while it works.
  uint32_t failure() const { return failure_.load(std::memory_order_relaxed); }

 private:
  template <bool kSafe>
  uint32_t WalkWith(gf_py_frame* frames, uint32_t* flags);
  template <bool kSafe>
  bool RunsNoPythonWith();

  static constexpr int kChecks = 8;  // verified walks before plain loads

  gf_py_proc cfg_{};
  uint32_t code_argcount_ = 0;     // 3.10: only read `self` of functions that take arguments
  uint32_t tstate_thread_id_ = 0;  // PyThreadState.thread_id: pthread_self() of its thread
  uintptr_t code_type_ = 0;        // &PyCode_Type, for the checks
  int (*finalizing_)() = nullptr;  // (_)Py_IsFinalizing: an atomic load, no GIL needed
  std::atomic<uint32_t> failure_{GF_TENSOR_HOOK_NO_PYTHON};
  std::atomic<int> checks_left_{kChecks};
};

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_PYTHON_WALKER_H_
