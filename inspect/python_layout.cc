#include "inspect/python_layout.h"

namespace gpuflame::inspect {

std::optional<PythonLayout> LayoutFor(PythonVersion v) {
  if (v.major != 3) return std::nullopt;
  PythonLayout l;
  l.version = v;
  switch (v.minor) {
    case 10:
      l.runtime_tss = 584;
      l.runtime_interp_head = 32;
      l.interp_threads_head = 8;
      l.tstate_frame = 24;
      l.tstate_thread_id = 176;
      l.frame_code = 32;
      l.frame_back = 24;
      l.frame_instr = 96;  // int f_lasti, in code units
      l.frame_localsplus = 352;
      l.code_argcount = 16;
      l.code_flags = 36;
      l.code_firstlineno = 40;
      l.code_varnames = 72;
      l.code_filename = 104;
      l.code_name = 112;
      l.code_linetable = 120;
      l.unicode_ascii_data = 48;
      l.unicode_compact_data = 72;
      return l;
    case 11:
      l.runtime_tss = 592;
      l.runtime_interp_head = 40;
      l.interp_threads_head = 16;
      l.tstate_frame = 56;
      l.uses_cframe = true;
      l.cframe_current = 8;
      l.tstate_thread_id = 152;
      l.tstate_datastack_chunk = 296;
      l.frame_code = 32;
      l.frame_back = 48;
      l.frame_instr = 56;
      l.instr_is_pointer = true;
      l.frame_is_entry = 68;
      l.frame_localsplus = 72;
      l.code_argcount = 56;
      l.code_flags = 48;
      l.code_firstlineno = 72;
      l.code_filename = 112;
      l.code_name = 120;
      l.code_qualname = 128;
      l.code_linetable = 136;
      l.code_adaptive = 184;
      l.unicode_ascii_data = 48;
      l.unicode_compact_data = 72;
      return l;
    case 12:
      l.runtime_tss = 1544;
      l.runtime_interp_head = 40;
      l.interp_threads_head = 72;
      l.tstate_frame = 56;
      l.uses_cframe = true;
      l.cframe_current = 0;
      l.tstate_thread_id = 136;
      l.tstate_datastack_chunk = 232;
      l.frame_code = 0;
      l.frame_back = 8;
      l.frame_instr = 56;
      l.instr_is_pointer = true;
      l.frame_owner = 70;
      l.frame_localsplus = 72;
      l.code_argcount = 52;
      l.code_flags = 48;
      l.code_firstlineno = 68;
      l.code_filename = 112;
      l.code_name = 120;
      l.code_qualname = 128;
      l.code_linetable = 136;
      l.code_adaptive = 192;
      l.unicode_ascii_data = 40;
      l.unicode_compact_data = 56;
      return l;
    case 13:
      l.runtime_tss = 2160;
      l.runtime_interp_head = 632;
      l.interp_threads_head = 7344;
      l.tstate_frame = 72;
      l.tstate_thread_id = 152;
      l.tstate_datastack_chunk = 232;
      l.frame_code = 0;  // f_executable
      l.frame_back = 8;
      l.frame_instr = 56;
      l.instr_is_pointer = true;
      l.frame_owner = 70;
      l.frame_localsplus = 72;
      l.code_argcount = 52;
      l.code_flags = 48;
      l.code_firstlineno = 68;
      l.code_filename = 112;
      l.code_name = 120;
      l.code_qualname = 128;
      l.code_linetable = 136;
      l.code_adaptive = 200;
      l.unicode_ascii_data = 40;
      l.unicode_compact_data = 56;
      return l;
    default:
      return std::nullopt;
  }
}

}  // namespace gpuflame::inspect
