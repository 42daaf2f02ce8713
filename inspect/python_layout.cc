#include "inspect/python_layout.h"

#include <algorithm>

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

gf_py_proc MakePyProc(const PythonLayout& l, uint64_t runtime_addr) {
  gf_py_proc p{};
  p.runtime_addr = runtime_addr;
  p.version = l.version.Hex();
  p.tss_off = l.runtime_tss;
  p.pthread_specific_off = kGlibcPthreadSpecific;
  p.tstate_frame = static_cast<uint16_t>(l.tstate_frame);
  p.cframe_current = static_cast<uint16_t>(l.cframe_current);
  p.frame_code = static_cast<uint16_t>(l.frame_code);
  p.frame_back = static_cast<uint16_t>(l.frame_back);
  p.frame_instr = static_cast<uint16_t>(l.frame_instr);
  p.frame_owner = static_cast<uint16_t>(l.frame_owner);
  p.frame_is_entry = static_cast<uint16_t>(l.frame_is_entry);
  p.frame_localsplus = static_cast<uint16_t>(l.frame_localsplus);
  p.code_adaptive = static_cast<uint16_t>(l.code_adaptive);
  p.code_firstlineno = static_cast<uint16_t>(l.code_firstlineno);
  p.uses_cframe = l.uses_cframe;
  p.instr_is_pointer = l.instr_is_pointer;
  p.read_self_type = l.version.minor <= 10;
  // Every frame field the walker reads lies in the frame's first bytes.
  uint32_t end = std::max({l.frame_code + 8, l.frame_back + 8, l.frame_instr + 8,
                           l.frame_owner + 1, l.frame_is_entry + 1});
  p.frame_read_len = static_cast<uint16_t>(end);
  p.tstate_datastack = static_cast<uint16_t>(l.tstate_datastack_chunk);
  return p;
}

}  // namespace gpuflame::inspect
