// Fuzz target for ELF symbol tables and layout (symbolizer/elf_file.cc):
// ElfFile::Open and its lookups, and ElfFile::ExportedFunctionOffset (the
// gate's one-symbol read). ELF files come from profiled processes
// (containers, pip wheels): they are untrusted. The input is the file;
// seeds are small real ELF files from the build (shared objects, PIE
// executables, stripped and not).
//
// Checked: a lookup names a symbol at or below the address asked about;
// a symbol found by name is at its lookup's start; the one-symbol reader
// finds nothing the full reader does not export; answers have bounded
// sizes (build ID, bytes read).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "input_file.h"
#include "symbolizer/elf_file.h"

namespace {

using gpuflame::symbolizer::ElfFile;

uint64_t Word(const uint8_t* data, size_t size, size_t at) {
  uint64_t v = 0;
  if (at + sizeof(v) <= size) std::memcpy(&v, data + at, sizeof(v));
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gpuflame::fuzz::InputFile("input.elf", data, size);

  // Names the agent looks up, and one it never would.
  const std::vector<std::string> names = {"cudaMalloc", "_PyRuntime", "Py_Version", "main", "no such symbol"};
  auto elf = ElfFile::Open(path);
  if (!elf.ok()) {
    FUZZ_CHECK(!elf.status().message().empty());  // a clear error, never an empty one
    for (const std::string& n : names) FUZZ_CHECK(!ElfFile::ExportedFunctionOffset(path, n));
    return 0;
  }
  FUZZ_CHECK(elf->build_id().size() % 2 == 0 && elf->build_id().size() <= 128);
  FUZZ_CHECK(elf->MemoryUsage() >= elf->symbol_count());

  // Addresses to look up: the entry point and section offsets of the header
  // (e_entry, e_phoff, e_shoff), and the edges.
  std::vector<uint64_t> addrs = {0, 1, 0x1000, ~0ull, Word(data, size, 24), Word(data, size, 32), Word(data, size, 40)};
  std::vector<std::string> found_names;
  for (uint64_t a : addrs) {
    if (auto hit = elf->Lookup(a)) {
      FUZZ_CHECK(hit->start <= a);
      FUZZ_CHECK(!hit->name.empty() && hit->name.size() <= 4096);
      FUZZ_CHECK(elf->FindSymbol(hit->name).has_value());
      found_names.emplace_back(hit->name);
      if (auto again = elf->Lookup(hit->start)) FUZZ_CHECK(again->start == hit->start);
    }
    (void)elf->VaddrToOffset(a);
    (void)elf->LoadBias(a, a & ~0xfffull);
    if (auto bytes = elf->ReadVaddr(a, 16)) FUZZ_CHECK(bytes->size() == 16);
  }

  for (const std::string& n : names) found_names.push_back(n);
  for (const std::string& n : found_names) {
    if (auto sym = elf->FindSymbol(n)) {
      auto hit = elf->Lookup(*sym);
      FUZZ_CHECK(!hit || hit->start <= *sym);
    }
    // What the one-symbol reader finds is a function the full reader exports.
    if (ElfFile::ExportedFunctionOffset(path, n)) FUZZ_CHECK(elf->Exports(n));
  }
  // What a seed exercises, to see that it reaches the tables (not only errors).
  if (std::getenv("GPUFLAME_FUZZ_VERBOSE"))
    std::fprintf(stderr, "elf_file: %zu symbols, build ID %s, %zu names looked up\n", elf->symbol_count(),
                 elf->build_id().c_str(), found_names.size());
  return 0;
}
