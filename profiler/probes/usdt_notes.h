// USDT probes (SystemTap's <sys/sdt.h>) as an ELF file declares them: the
// notes of its .note.stapsdt section, and each argument's location in the
// form the BPF programs read (struct gf_usdt_spec).
//
// Our own parser, not libbpf's: libbpf 1.1 parses these only inside
// bpf_program__attach_usdt, which makes one perf-event uprobe per site, and
// those leave the profiled processes slowly (link_reaper.h); gpuflame
// attaches the sites itself, as uprobe_multi links where the kernel has them
// (BpfProbes::AttachUsdt). The bytes come from the profiled process's files:
// untrusted, bounded, fuzzed (tests/fuzz/usdt_notes_fuzzer.cc). x86-64 only,
// as the rest of gpuflame.
#ifndef GPUFLAME_PROFILER_PROBES_USDT_NOTES_H_
#define GPUFLAME_PROFILER_PROBES_USDT_NOTES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bpf/gpuflame_abi.h"

namespace gpuflame::profiler {

// One stapsdt note: a probe site.
struct UsdtNote {
  uint64_t pc = 0;         // the site's link-time address
  uint64_t base = 0;       // .stapsdt.base's address when the note was written (prelink)
  uint64_t semaphore = 0;  // its semaphore's link-time address; 0: none
  std::string provider;
  std::string name;
  std::string args;  // "-4@%eax 8@-16(%rbp) ..."
};

// The notes of a .note.stapsdt section's bytes (type 3, owner "stapsdt"),
// at most |max_notes|; a malformed note ends the list.
std::vector<UsdtNote> ParseUsdtNotes(std::string_view section, size_t max_notes = 65536);

// The site's link-time address, corrected for prelink: where the file has
// a .stapsdt.base section at |stapsdt_base|, the note's pc moves with it.
uint64_t UsdtSiteAddress(const UsdtNote& note, uint64_t stapsdt_base);

// The x86-64 argument string of a note, as libbpf reads it: sizes 1, 2, 4
// or 8 (negative: signed), each a register (-4@%eax), a register plus an
// offset dereferenced (8@-16(%rbp), 8@(%rax)), or a constant (4@$5). An
// error names what is not understood (an index register, %rip-relative
// symbols): such a probe is not attached.
absl::StatusOr<gf_usdt_spec> ParseUsdtArgs(std::string_view args);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_USDT_NOTES_H_
