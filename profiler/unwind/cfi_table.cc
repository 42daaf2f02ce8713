#include "profiler/unwind/cfi_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "symbolizer/elf_begin.h"

namespace gpuflame::profiler {
namespace {

// x86-64 DWARF register numbers.
constexpr unsigned kRbp = 6;
constexpr unsigned kRsp = 7;
// Past this many distinct rows a table stops growing (a hostile or huge
// binary); lookups beyond it are computed each time, still correct.
constexpr size_t kMaxRows = 1 << 18;

struct Frame {
  Dwarf_Frame* f = nullptr;
  ~Frame() { std::free(f); }
};

// Where a register is saved, as libdw describes it. Returns false for rules
// outside the fast subset.
enum class Saved { kSame, kUndefined, kAtCfa, kUnsupported };
Saved SavedRule(Dwarf_Frame* frame, int regno, int32_t* offset) {
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t nops = 0;
  if (dwarf_frame_register(frame, regno, mem, &ops, &nops) != 0) return Saved::kUnsupported;
  if (nops == 0) return ops == nullptr ? Saved::kSame : Saved::kUndefined;
  if (ops[0].atom != DW_OP_call_frame_cfa) return Saved::kUnsupported;
  if (nops == 1) {
    *offset = 0;
    return Saved::kAtCfa;
  }
  if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
    *offset = static_cast<int32_t>(static_cast<int64_t>(ops[1].number));
    return Saved::kAtCfa;
  }
  return Saved::kUnsupported;  // val_offset (DW_OP_stack_value) or an expression
}

bool CfaRule(Dwarf_Frame* frame, UnwindRow* row) {
  Dwarf_Op* ops = nullptr;
  size_t nops = 0;
  if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1) return false;
  unsigned reg;
  int64_t offset;
  if (ops[0].atom == DW_OP_bregx) {
    reg = static_cast<unsigned>(ops[0].number);
    offset = static_cast<int64_t>(ops[0].number2);
  } else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
    reg = ops[0].atom - DW_OP_breg0;
    offset = static_cast<int64_t>(ops[0].number);
  } else {
    return false;
  }
  if (reg != kRsp && reg != kRbp) return false;
  if (offset < INT32_MIN || offset > INT32_MAX) return false;
  row->cfa = reg == kRsp ? UnwindRow::Cfa::kRsp : UnwindRow::Cfa::kRbp;
  row->cfa_offset = static_cast<int32_t>(offset);
  return true;
}

std::optional<CfiTable::LoadSpan> LoadSpanOf(Elf* elf) {
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(elf, &ehdr) || ehdr.e_type == ET_REL) return std::nullopt;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return std::nullopt;
  std::optional<CfiTable::LoadSpan> span;
  // Bounded by the file: libelf refuses a program header table larger than it.
  for (size_t i = 0; i < phnum; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    uint64_t end = 0;
    if (__builtin_add_overflow(ph.p_vaddr, ph.p_memsz, &end)) return std::nullopt;
    // libdwfl's own expression (open_elf), an alignment of 0 included, so
    // that the bias it derives is the one the span was reported at.
    if (!span) span = CfiTable::LoadSpan{.low = ph.p_vaddr & -ph.p_align, .high = end};
    span->high = std::max(span->high, end);
  }
  if (span && span->high <= span->low) return std::nullopt;
  return span;
}

}  // namespace

struct CfiTable::Handles {
  symbolizer::HeldElf elf;        // ended after the CFI and DWARF handles, in the destructor's wake
  Dwarf_CFI* eh = nullptr;        // .eh_frame (owned)
  Dwarf* dwarf = nullptr;         // for .debug_frame, opened on first need
  Dwarf_CFI* debug = nullptr;     // owned by |dwarf|
  bool debug_tried = false;
  ~Handles() {
    if (eh) dwarf_cfi_end(eh);
    if (dwarf) dwarf_end(dwarf);
  }
  Dwarf_CFI* DebugFrame() {
    if (!debug_tried) {
      debug_tried = true;
      dwarf = dwarf_begin_elf(elf.get(), DWARF_C_READ, nullptr);
      if (dwarf) debug = dwarf_getcfi(dwarf);
    }
    return debug;
  }
};

CfiTable::CfiTable(std::unique_ptr<Handles> h) : handles_(std::move(h)) {}
CfiTable::~CfiTable() = default;

std::unique_ptr<CfiTable> CfiTable::Open(base::ScopedFd fd) {
  auto h = std::make_unique<Handles>();
  h->elf = symbolizer::HeldElf::Begin(std::move(fd));
  if (!h->elf) return nullptr;
  h->eh = dwarf_getcfi_elf(h->elf.get());
  auto table = std::unique_ptr<CfiTable>(new CfiTable(std::move(h)));
  table->load_span_ = LoadSpanOf(table->handles_->elf.get());
  return table;
}

Elf* CfiTable::ElfReference() const {
  // For a file that is no archive, libelf hands back the same handle with
  // its count raised (-1: the descriptor it was given up for).
  return elf_begin(-1, ELF_C_READ_MMAP_PRIVATE, handles_->elf.get());
}

UnwindRow CfiTable::Compute(uint64_t vaddr) {
  UnwindRow row;
  row.start = vaddr;
  row.end = vaddr + 1;
  Frame frame;
  if (!handles_->eh || dwarf_cfi_addrframe(handles_->eh, vaddr, &frame.f) != 0) {
    frame.f = nullptr;
    Dwarf_CFI* debug = handles_->DebugFrame();
    if (!debug || dwarf_cfi_addrframe(debug, vaddr, &frame.f) != 0) return row;  // no CFI here
  }
  Dwarf_Addr start = 0, end = 0;
  bool signal = false;
  int ra_reg = dwarf_frame_info(frame.f, &start, &end, &signal);
  if (ra_reg < 0 || signal || start > vaddr || end <= vaddr) return row;
  row.start = start;
  row.end = end;
  int32_t ra_offset = 0;
  switch (SavedRule(frame.f, ra_reg, &ra_offset)) {
    case Saved::kUndefined:
      row.kind = UnwindRow::Kind::kOutermost;
      return row;
    case Saved::kAtCfa:
      row.ra_offset = ra_offset;
      break;
    default:
      return row;
  }
  if (!CfaRule(frame.f, &row)) return row;
  int32_t rbp_offset = 0;
  switch (SavedRule(frame.f, kRbp, &rbp_offset)) {
    case Saved::kSame:
      row.rbp = UnwindRow::Rbp::kSame;
      break;
    case Saved::kUndefined:
      row.rbp = UnwindRow::Rbp::kUndefined;
      break;
    case Saved::kAtCfa:
      row.rbp = UnwindRow::Rbp::kAtCfa;
      row.rbp_offset = rbp_offset;
      break;
    case Saved::kUnsupported:
      return row;
  }
  row.kind = UnwindRow::Kind::kFrame;
  return row;
}

const UnwindRow& CfiTable::Find(uint64_t vaddr) {
  auto it = std::upper_bound(rows_.begin(), rows_.end(), vaddr,
                             [](uint64_t a, const UnwindRow& r) { return a < r.start; });
  if (it != rows_.begin() && vaddr < std::prev(it)->end) return *std::prev(it);
  UnwindRow row = Compute(vaddr);
  // A row that is no half-open range is answered, not cached: the last
  // address's placeholder [vaddr, vaddr + 1) wraps to end 0, and in the table
  // it would break the order the search relies on and be added again at
  // every later lookup of that address (found by tests/fuzz/cfi_fuzzer.cc:
  // a section header's address near 2^64 in a hostile file).
  if (rows_.size() >= kMaxRows || row.end <= row.start) {
    overflow_ = row;
    return overflow_;
  }
  // Rows from libdw never overlap, but a no-CFI placeholder might sit inside a
  // range found later; keep the table disjoint by trimming to the gap.
  uint64_t lo = it != rows_.begin() ? std::prev(it)->end : 0;
  uint64_t hi = it != rows_.end() ? it->start : UINT64_MAX;
  row.start = std::max(row.start, lo);
  row.end = std::min(row.end, hi);
  return *rows_.insert(it, row);
}

size_t CfiCache::Sweep(int64_t now_ns, int64_t keep_ns) {
  const size_t before = tables_.size();
  absl::erase_if(tables_, [&](auto& kv) {
    Entry& e = kv.second;
    if (e.table && e.table.use_count() > 1) {
      e.unused_since_ns = -1;
      return false;
    }
    if (e.unused_since_ns < 0) e.unused_since_ns = now_ns;
    return now_ns - e.unused_since_ns >= keep_ns;
  });
  evicted_ += before - tables_.size();
  return before - tables_.size();
}

size_t CfiCache::MemoryUsage() const {
  size_t total = 0;
  for (const auto& [k, e] : tables_)
    if (e.table) total += e.table->MemoryUsage() + sizeof(CfiTable) + k.size();
  return total;
}

}  // namespace gpuflame::profiler
