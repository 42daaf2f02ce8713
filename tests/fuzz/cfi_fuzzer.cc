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
// to libdwfl, with the table's own handle, gives libdwfl the bias it was
// reported at.
#include <elfutils/libdwfl.h>
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

constexpr uint64_t kBias = 0x7f0000000000;

// The native unwinder's way of handing libdwfl a module (native_unwinder.cc):
// the table's handle, nothing opened.
int TableElf(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, char**, Elf** elfp) {
  *elfp = static_cast<const CfiTable*>(*userdata)->ElfReference();
  return -1;
}
int NoDebuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word, char** name) {
  *name = nullptr;
  return -1;
}
const Dwfl_Callbacks kCallbacks = {
    .find_elf = TableElf, .find_debuginfo = NoDebuginfo, .section_address = nullptr, .debuginfo_path = nullptr};

// The bias libdwfl derives for the file reported at kBias + |span|; 0 where
// the addresses wrap or libdwfl takes no file, which the caller's check
// then fails on.
uint64_t LibdwflBias(const CfiTable& table, const CfiTable::LoadSpan& span) {
  uint64_t low = 0, high = 0;
  if (__builtin_add_overflow(kBias, span.low, &low) || __builtin_add_overflow(kBias, span.high, &high)) return kBias;
  Dwfl* dwfl = dwfl_begin(&kCallbacks);
  FUZZ_CHECK(dwfl != nullptr);
  dwfl_report_begin(dwfl);
  Dwfl_Module* module = dwfl_report_module(dwfl, "input", low, high);
  FUZZ_CHECK(module != nullptr);
  void** userdata = nullptr;
  dwfl_module_info(module, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  *userdata = const_cast<CfiTable*>(&table);
  dwfl_report_end(dwfl, nullptr, nullptr);
  Dwarf_Addr bias = 0;
  const bool took = dwfl_module_getelf(module, &bias) != nullptr;
  dwfl_end(dwfl);
  return took ? bias : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gpuflame::fuzz::InputFile("input.elf", data, size);
  gpuflame::base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  FUZZ_CHECK(fd.valid());
  const std::vector<uint64_t> addrs = gpuflame::fuzz::CodeAddresses(fd.get());
  auto table = CfiTable::Open(std::move(fd));
  if (!table) return 0;
  // The span libdwfl gets (program headers, untrusted), reported at a load
  // bias, gives back that very bias from libdwfl's own reading of the file.
  if (const auto& span = table->load_span()) {
    FUZZ_CHECK(span->low < span->high);
    FUZZ_CHECK(LibdwflBias(*table, *span) == kBias);
  }

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
