// Fuzz target for the CFI reader of the native unwinder
// (profiler/unwind/cfi_table.cc): CfiTable::Open on an ELF file and
// CfiTable::Find, which runs libdw's .eh_frame / .debug_frame interpreter
// and keeps the rules of the fast subset as cached rows. The file is one a
// profiled process mapped: untrusted. The input is the file; seeds are small
// real ELF files from the build.
//
// Addresses asked about: spread over every executable section the section
// headers name (where FDEs point), and the header's entry point. Checked:
// the row answered covers the address (the last address, 2^64 - 1, has no
// half-open range: it gets a row without a rule); asking again, after other
// lookups have filled the cache around it, gives the same rule; the cache
// holds no more rows than addresses were asked about; the load span handed
// to libdwfl is empty or a range, and the shared handle is the table's.
#include <libelf.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "elf_addresses.h"
#include "fuzz_check.h"
#include "input_file.h"
#include "profiler/unwind/cfi_table.h"

namespace {

using gpuflame::profiler::CfiTable;
using gpuflame::profiler::UnwindRow;

bool Covers(const UnwindRow& row, uint64_t a) {
  if (a == UINT64_MAX) return row.kind == UnwindRow::Kind::kUnsupported;
  return row.start <= a && a < row.end;
}

bool SameRule(const UnwindRow& a, const UnwindRow& b) {
  return a.kind == b.kind && a.cfa == b.cfa && a.cfa_offset == b.cfa_offset && a.ra_offset == b.ra_offset &&
         a.rbp == b.rbp && a.rbp_offset == b.rbp_offset;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gpuflame::fuzz::InputFile("input.elf", data, size);
  gpuflame::base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  FUZZ_CHECK(fd.valid());
  const std::vector<uint64_t> addrs = gpuflame::fuzz::CodeAddresses(fd.get());
  auto table = CfiTable::Open(std::move(fd));
  if (!table) return 0;
  // The span libdwfl gets (program headers, untrusted) is a range or none,
  // and the handle libdwfl is given is the table's, whatever the file.
  if (const auto& span = table->load_span()) FUZZ_CHECK(span->low < span->high);
  Elf* shared = table->ElfReference();
  FUZZ_CHECK(shared != nullptr);
  elf_end(shared);

  std::vector<UnwindRow> first;
  first.reserve(addrs.size());
  for (uint64_t a : addrs) {
    const UnwindRow& row = table->Find(a);
    if (!Covers(row, a))
      std::fprintf(stderr, "cfi: address %#llx answered with row [%#llx, %#llx)\n", static_cast<unsigned long long>(a),
                   static_cast<unsigned long long>(row.start), static_cast<unsigned long long>(row.end));
    FUZZ_CHECK(Covers(row, a));
    first.push_back(row);
  }
  // The same answers from the cache, in the other order, adding no rows.
  const size_t rows = table->rows();
  for (size_t i = addrs.size(); i-- > 0;) {
    const UnwindRow& row = table->Find(addrs[i]);
    FUZZ_CHECK(Covers(row, addrs[i]));
    FUZZ_CHECK(SameRule(row, first[i]));
  }
  FUZZ_CHECK(table->rows() == rows && rows <= addrs.size());
  // What a seed exercises, to see that it reaches the rules (not only errors).
  if (std::getenv("GPUFLAME_FUZZ_VERBOSE")) {
    size_t frames = 0;
    for (const UnwindRow& r : first) frames += r.kind == UnwindRow::Kind::kFrame;
    std::fprintf(stderr, "cfi: %zu addresses, %zu rows, %zu with a fast rule\n", addrs.size(), table->rows(), frames);
  }
  return 0;
}
