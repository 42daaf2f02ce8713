// Fuzz target for DWARF inline frames (symbolizer/dwarf_inlines.cc,
// DwarfInlines::Open and At): libdw over a module's .debug_info, whose DIE
// tree, ranges and line table are the file's, and the file is one a
// profiled process mapped. The walks are bounded in depth and siblings:
// here they must answer within the fuzzers' time limit for any tree. The
// input is the file; seeds are small ELF files of the build with DWARF.
//
// Checked: the chain is bounded (the function, then at most the walk's
// depth of inlined calls); looking up the same address twice gives the same
// chain.
#include <fcntl.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "elf_addresses.h"
#include "fuzz_check.h"
#include "input_file.h"
#include "symbolizer/dwarf_inlines.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpuflame::symbolizer::SourceFrame;
  const std::string path = gpuflame::fuzz::InputFile("input.elf", data, size);
  gpuflame::base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  FUZZ_CHECK(fd.valid());
  const std::vector<uint64_t> addrs = gpuflame::fuzz::CodeAddresses(fd.get());
  auto dwarf = gpuflame::symbolizer::DwarfInlines::Open(std::move(fd));
  if (!dwarf) return 0;

  size_t found = 0;
  for (uint64_t a : addrs) {
    const std::vector<SourceFrame> chain = dwarf->At(a);
    FUZZ_CHECK(chain.size() <= 1 + 66);  // dwarf_inlines.cc: kMaxDepth 64, counted from 0
    const std::vector<SourceFrame> again = dwarf->At(a);
    FUZZ_CHECK(again.size() == chain.size());
    for (size_t i = 0; i < chain.size(); i++)
      FUZZ_CHECK(again[i].system_name == chain[i].system_name && again[i].line == chain[i].line);
    found += !chain.empty();
  }
  // What a seed exercises, to see that it reaches the DIE tree (not only errors).
  if (std::getenv("GPUFLAME_FUZZ_VERBOSE"))
    std::fprintf(stderr, "dwarf_inlines: %zu addresses, %zu in a function\n", addrs.size(), found);
  return 0;
}
