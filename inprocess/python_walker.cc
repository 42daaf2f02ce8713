#include "inprocess/python_walker.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "inspect/python_layout.h"

namespace gpuflame::inprocess {
namespace {

constexpr uint8_t kOwnedByCStack = 3;  // 3.12+ frame owner of the C entry shim
constexpr uint64_t kTypeSubclass = 1ull << 31;
constexpr uint32_t kTypeFlagsOffset = 168;  // PyTypeObject.tp_flags, 3.10-3.13

// Reads a T at |addr|: fault-safe (a syscall that fails instead of crashing)
// while the layout is unproven, a plain load after.
template <bool kSafe, typename T>
bool Read(uintptr_t addr, T* out) {
  if constexpr (kSafe) {
    iovec local{out, sizeof(T)};
    iovec remote{reinterpret_cast<void*>(addr), sizeof(T)};
    // Through this thread, not the process's pid: once the leader thread
    // has ended (main()'s pthread_exit), the kernel serves its pid nothing,
    // and a failed read would turn the walker off for good. Only the first
    // few walks read this way.
    return process_vm_readv(static_cast<pid_t>(syscall(SYS_gettid)), &local, 1, &remote, 1, 0) ==
           static_cast<ssize_t>(sizeof(T));
  } else {
    std::memcpy(out, reinterpret_cast<const void*>(addr), sizeof(T));
    return true;
  }
}

// The interpreter's version, from Py_Version (3.11+) or Py_GetVersion().
bool FindVersion(inspect::PythonVersion* v) {
  if (const auto* hex = static_cast<const uint32_t*>(dlsym(RTLD_DEFAULT, "Py_Version"))) {
    *v = {static_cast<int>(*hex >> 24), static_cast<int>((*hex >> 16) & 0xff), static_cast<int>((*hex >> 8) & 0xff)};
    return true;
  }
  auto get = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  return get && std::sscanf(get(), "%d.%d.%d", &v->major, &v->minor, &v->micro) >= 2;
}

}  // namespace

uint32_t PythonWalker::Init() {
  const auto runtime = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "_PyRuntime"));
  code_type_ = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  const auto type_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyType_Type"));
  void* finalizing = dlsym(RTLD_DEFAULT, "Py_IsFinalizing");              // 3.13
  if (!finalizing) finalizing = dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");  // 3.10-3.12
  finalizing_ = reinterpret_cast<int (*)()>(finalizing);
  inspect::PythonVersion version;
  if (!runtime || !code_type_ || !type_type || !finalizing_ || !FindVersion(&version)) return GF_TENSOR_HOOK_NO_PYTHON;
  auto layout = inspect::LayoutFor(version);
  if (!layout) return GF_TENSOR_HOOK_UNSUPPORTED_PYTHON;
  // The object header the checks rely on, read safely: a build whose
  // objects are laid out otherwise (debug, free-threaded) fails here.
  uintptr_t code_type_type = 0;
  if (!Read<true>(code_type_ + 8, &code_type_type) || code_type_type != type_type)
    return GF_TENSOR_HOOK_WALK_CHECK_FAILED;
  cfg_ = inspect::MakePyProc(*layout, runtime);  // the BPF walker's layout; its pthread offset goes unused here
  code_argcount_ = layout->code_argcount;
  tstate_thread_id_ = layout->tstate_thread_id;
  failure_.store(0, std::memory_order_relaxed);
  return 0;
}

uint32_t PythonWalker::Walk(gf_py_frame* frames, uint32_t* flags) {
  if (failure()) return 0;
  // Finalization frees other threads' states while their TSS slots still
  // point at them: no walk from then on (frees never walk, allocations then
  // are few). Also before any check, which reads through the same pointers.
  if (finalizing_()) {
    *flags |= GF_EVF_PY_NO_THREAD;
    return 0;
  }
  if (checks_left_.load(std::memory_order_relaxed) <= 0) return WalkWith<false>(frames, flags);
  uint32_t checked_flags = 0;
  uint32_t n = WalkWith<true>(frames, &checked_flags);
  *flags |= checked_flags;
  if (failure()) return 0;
  // A walk that read nothing proved nothing: only walks over real frames count.
  if (checked_flags & GF_EVF_PY_READ_FAILED) {
    failure_.store(GF_TENSOR_HOOK_WALK_CHECK_FAILED, std::memory_order_relaxed);
    return 0;
  }
  for (uint32_t i = 0; i < n; i++)
    if (frames[i].code) {
      checks_left_.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
  return n;
}

bool PythonWalker::ThreadRunsNoPython() {
  if (failure() || finalizing_()) return false;
  return checks_left_.load(std::memory_order_relaxed) > 0 ? RunsNoPythonWith<true>() : RunsNoPythonWith<false>();
}

template <bool kSafe>
bool PythonWalker::RunsNoPythonWith() {
  const gf_py_proc& c = cfg_;
  int32_t tss[2] = {0, 0};
  if (!Read<kSafe>(c.runtime_addr + c.tss_off, &tss) || tss[0] != 1 || tss[1] < 0 || tss[1] >= 1024) return false;
  // The slot stays set while the thread's GIL is released (PyEval_SaveThread
  // swaps the current state out, not the gilstate mapping): a thread in C
  // code under Python, like the backward() caller itself, still shows its
  // frames here.
  const auto tstate = reinterpret_cast<uintptr_t>(pthread_getspecific(static_cast<pthread_key_t>(tss[1])));
  if (!tstate) return true;
  uint64_t thread_id = 0;
  if ((tstate & 7) || !Read<kSafe>(tstate + tstate_thread_id_, &thread_id) ||
      thread_id != static_cast<uint64_t>(pthread_self()))
    return false;
  uintptr_t frame = 0;
  if (!Read<kSafe>(tstate + c.tstate_frame, &frame) ||
      (c.uses_cframe && frame && !Read<kSafe>(frame + c.cframe_current, &frame)))
    return false;
  return frame == 0;
}

template <bool kSafe>
uint32_t PythonWalker::WalkWith(gf_py_frame* frames, uint32_t* flags) {
  const gf_py_proc& c = cfg_;
  // The thread state is CPython's autoTSSkey slot, as in the BPF walker: the
  // GIL holder is usually another thread when the allocator runs.
  int32_t tss[2] = {0, 0};  // Py_tss_t { int _is_initialized; pthread_key_t _key; }
  if (!Read<kSafe>(c.runtime_addr + c.tss_off, &tss)) {
    *flags |= GF_EVF_PY_READ_FAILED;
    return 0;
  }
  // PTHREAD_KEYS_MAX is 1024: anything else is not a key.
  if (tss[0] != 1 || tss[1] < 0 || tss[1] >= 1024) {
    *flags |= GF_EVF_PY_KEY_UNSET;
    return 0;
  }
  const auto tstate = reinterpret_cast<uintptr_t>(pthread_getspecific(static_cast<pthread_key_t>(tss[1])));
  if (!tstate) {
    *flags |= GF_EVF_PY_NO_THREAD;
    return 0;
  }
  // The state must be this thread's own (not a stale one left in the slot).
  uint64_t thread_id = 0;
  if ((tstate & 7) || !Read<kSafe>(tstate + tstate_thread_id_, &thread_id)) {
    *flags |= GF_EVF_PY_READ_FAILED;
    return 0;
  }
  if (thread_id != static_cast<uint64_t>(pthread_self())) {
    *flags |= GF_EVF_PY_NO_THREAD;
    return 0;
  }
  uintptr_t frame = 0;
  if (!Read<kSafe>(tstate + c.tstate_frame, &frame) ||
      (c.uses_cframe && frame && !Read<kSafe>(frame + c.cframe_current, &frame))) {
    *flags |= GF_EVF_PY_READ_FAILED;
    return 0;
  }
  uint32_t n = 0;
  for (int depth = 0; frame && depth <= GF_MAX_PY_FRAMES; depth++) {
    if (n >= GF_MAX_PY_FRAMES) {
      *flags |= GF_EVF_PY_TRUNCATED;
      break;
    }
    uintptr_t code = 0, back = 0;
    if ((frame & 7) || !Read<kSafe>(frame + c.frame_code, &code) || !Read<kSafe>(frame + c.frame_back, &back)) {
      *flags |= GF_EVF_PY_READ_FAILED;
      break;
    }
    uint8_t owner = 0;
    if (c.frame_owner && !Read<kSafe>(frame + c.frame_owner, &owner)) {
      *flags |= GF_EVF_PY_READ_FAILED;
      break;
    }
    gf_py_frame& f = frames[n];
    std::memset(&f, 0, sizeof(f));
    if (c.frame_owner && owner == kOwnedByCStack) {
      f.flags = GF_PYF_TRAMPOLINE;  // 3.12/3.13's C entry shim
      n++;
      frame = back;
      continue;
    }
    if constexpr (kSafe) {
      uintptr_t type = 0;
      if (!code || !Read<true>(code + 8, &type) || type != code_type_) {
        failure_.store(GF_TENSOR_HOOK_WALK_CHECK_FAILED, std::memory_order_relaxed);
        return 0;
      }
    }
    f.code = code;
    if (c.instr_is_pointer) {
      uintptr_t ip = 0;
      Read<kSafe>(frame + c.frame_instr, &ip);
      const uintptr_t start = code + c.code_adaptive;
      f.instr = ip >= start ? static_cast<uint32_t>((ip - start) / 2) : 0;
    } else {
      int32_t lasti = 0;
      Read<kSafe>(frame + c.frame_instr, &lasti);
      f.instr = lasti > 0 ? static_cast<uint32_t>(lasti) : 0;
    }
    // co_firstlineno, as the BPF walker takes for samples: lets user space
    // tell a freed code object's reused address from the original.
    int32_t first = 0;
    if (Read<kSafe>(code + c.code_firstlineno, &first)) {
      f.first_line = static_cast<uint16_t>(first);
      f.flags |= GF_PYF_FIRST_LINE;
    }
    if (c.read_self_type) {
      // 3.10 has no co_qualname: the class of `self`/`cls` names the method.
      // localsplus[0] is an argument only in functions that take one.
      int32_t argcount = 0;
      uintptr_t obj = 0, type = 0;
      uint64_t tp_flags = 0;
      if (Read<kSafe>(code + code_argcount_, &argcount) && argcount > 0 &&
          Read<kSafe>(frame + c.frame_localsplus, &obj) && obj && Read<kSafe>(obj + 8, &type) && type &&
          Read<kSafe>(type + kTypeFlagsOffset, &tp_flags))
        f.aux = (tp_flags & kTypeSubclass) ? obj : type;
    }
    n++;
    // 3.11 marks the first frame of a C activation instead of a shim.
    uint8_t entry = 0;
    if (c.frame_is_entry && Read<kSafe>(frame + c.frame_is_entry, &entry) && entry && n < GF_MAX_PY_FRAMES) {
      std::memset(&frames[n], 0, sizeof(gf_py_frame));
      frames[n].flags = GF_PYF_TRAMPOLINE;
      n++;
    }
    frame = back;
  }
  return n;
}

}  // namespace gpuflame::inprocess
