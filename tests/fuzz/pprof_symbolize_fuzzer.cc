// Fuzz target for `gpuflame symbolize` (app/symbolize_command.cc,
// RunSymbolize, and what it calls: gzip detection and inflation, pprof
// parsing, build-ID lookup, rewriting): a stored profile is a file a user
// hands us, from anywhere. The input is the file, gzipped or not; seeds are
// real pprof files written by the end-to-end tests, with frames kept as raw
// addresses (`module+0xOFFSET`) that symbolize resolves.
//
// Binaries are searched in the ELF seeds (tests/fuzz/corpus/elf_file/), so
// that the build-ID index is walked too. A mapping's own file name is tried
// as well, as in production: an input may name any file of the machine.
//
// Checked: the command answers 0 or 2 (never a crash, an uncaught
// exception or an unbounded allocation: the sanitizers and the fuzzers'
// memory limit see those); what it writes, it reads back (symbolize of its
// own output succeeds).
#include <cstddef>
#include <cstdint>
#include <string>

#include "app/symbolize_command.h"
#include "fuzz_check.h"
#include "input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpuflame::profiler::SymbolizeOptions o;
  o.input = gpuflame::fuzz::InputFile("input.pb.gz", data, size);
  o.output = gpuflame::fuzz::ScratchDir() + "/output.pb.gz";
  o.binary_dirs = {GPUFLAME_FUZZ_BINARIES};
  const int rc = gpuflame::profiler::RunSymbolize(o);
  FUZZ_CHECK(rc == 0 || rc == 2);
  if (rc != 0) return 0;
  // Its own output is a profile it reads.
  gpuflame::profiler::SymbolizeOptions again = o;
  again.input = o.output;
  again.output = gpuflame::fuzz::ScratchDir() + "/again.pb.gz";
  FUZZ_CHECK(gpuflame::profiler::RunSymbolize(again) == 0);
  return 0;
}
