// CPython 3.10-3.13 object layouts on x86-64, verified against live
// interpreters (pyenv 3.10-3.13 and Debian's static 3.11, read with gdb and
// cross-checked with PyCode_Type's tp_members/tp_basicsize; 3.13's also match
// its _Py_DebugOffsets). One table per
// minor version: the fields are identical across patch releases.
#ifndef GPUFLAME_INSPECT_PYTHON_LAYOUT_H_
#define GPUFLAME_INSPECT_PYTHON_LAYOUT_H_

#include <cstdint>
#include <optional>

#include "bpf/gpuflame_abi.h"

namespace gpuflame::inspect {

struct PythonVersion {
  int major = 0;
  int minor = 0;
  int micro = 0;
  uint32_t Hex() const { return static_cast<uint32_t>(major << 8 | minor); }
};

// Everything the BPF walker and the code-object reader need, in bytes.
struct PythonLayout {
  PythonVersion version;
  // _PyRuntime
  uint32_t runtime_tss = 0;         // Py_tss_t autoTSSkey
  uint32_t runtime_interp_head = 0;
  // PyInterpreterState / PyThreadState
  uint32_t interp_threads_head = 0;
  uint32_t tstate_next = 8;
  uint32_t tstate_frame = 0;  // frame (3.10), cframe (3.11/3.12), current_frame (3.13)
  bool uses_cframe = false;
  uint32_t cframe_current = 0;
  uint32_t tstate_thread_id = 0;
  // 3.11+: where _PyInterpreterFrames are pushed; datastack_top follows it.
  // Verified with offsetof() against each version's internal headers.
  uint32_t tstate_datastack_chunk = 0;
  // frames
  uint32_t frame_code = 0;
  uint32_t frame_back = 0;
  uint32_t frame_instr = 0;
  bool instr_is_pointer = false;
  uint32_t frame_owner = 0;     // 0: none
  uint32_t frame_is_entry = 0;  // 0: none
  uint32_t frame_localsplus = 0;
  // code objects
  uint32_t code_argcount = 0;
  uint32_t code_flags = 0;
  uint32_t code_firstlineno = 0;
  uint32_t code_filename = 0;
  uint32_t code_name = 0;
  uint32_t code_qualname = 0;  // 0: none (3.10)
  uint32_t code_linetable = 0;
  uint32_t code_varnames = 0;  // 3.10 only: for the self/cls class heuristic
  uint32_t code_adaptive = 0;  // co_code_adaptive (3.11+)
  // strings
  uint32_t unicode_ascii_data = 0;    // sizeof(PyASCIIObject)
  uint32_t unicode_compact_data = 0;  // sizeof(PyCompactUnicodeObject)
  // common object header
  static constexpr uint32_t kObType = 8;
  static constexpr uint32_t kVarSize = 16;
  static constexpr uint32_t kTypeName = 24;
  static constexpr uint32_t kTupleItems = 24;
  static constexpr uint32_t kBytesData = 32;
  static constexpr uint32_t kUnicodeLength = 16;
  static constexpr uint32_t kUnicodeState = 32;
};

// The layout for a supported version (3.10-3.13), or nullopt.
std::optional<PythonLayout> LayoutFor(PythonVersion v);

// glibc's struct pthread.specific_1stblock on x86-64 (2.27 onwards; the
// Pyroscope glibc offset tables and strobelight agree).
inline constexpr uint32_t kGlibcPthreadSpecific = 0x310;

// What a stack walker needs of |l| (struct gf_py_proc, gpuflame_abi.h): the
// BPF walker and libgpuflame_cupti.so's in-process one.
gf_py_proc MakePyProc(const PythonLayout& l, uint64_t runtime_addr);

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_PYTHON_LAYOUT_H_
