// Fuzz target for USDT notes (profiler/probes/usdt_notes.cc): the bytes of a
// profiled process's library's .note.stapsdt section, and the argument
// strings inside them, which gpuflame turns into what its BPF programs read
// (register offsets into struct pt_regs). Seeds: the sections of the
// simulated libc10_cuda.so and of libgpuflame_cupti.so, as objcopy copies
// them (objcopy --dump-section .note.stapsdt=FILE).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "profiler/probes/usdt_notes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuflame::profiler;
  const std::string_view section(reinterpret_cast<const char*>(data), size);
  // Every note takes at least its 12-byte header and 24 bytes of addresses.
  const auto notes = ParseUsdtNotes(section);
  FUZZ_CHECK(notes.size() * 36 <= size);
  FUZZ_CHECK(ParseUsdtNotes(section, 1).size() <= 1);
  for (const UsdtNote& note : notes) {
    FUZZ_CHECK(note.provider.size() + note.name.size() + note.args.size() <= size);
    auto spec = ParseUsdtArgs(note.args);
    if (spec.ok()) {
      FUZZ_CHECK(spec->arg_cnt <= GF_USDT_MAX_ARGS);
      for (int i = 0; i < spec->arg_cnt; i++) {
        const gf_usdt_arg_spec& a = spec->args[i];
        FUZZ_CHECK(a.arg_type <= GF_USDT_ARG_REG_DEREF);
        FUZZ_CHECK(a.arg_bitshift == 0 || a.arg_bitshift == 32 || a.arg_bitshift == 48 || a.arg_bitshift == 56);
        // A register read stays inside struct pt_regs (21 words).
        if (a.arg_type != GF_USDT_ARG_CONST) FUZZ_CHECK(a.reg_off % 8 == 0 && a.reg_off <= 160);
      }
    }
  }
  // The whole input as one argument string too.
  auto spec = ParseUsdtArgs(section);
  if (spec.ok()) FUZZ_CHECK(spec->arg_cnt <= GF_USDT_MAX_ARGS);
  return 0;
}
