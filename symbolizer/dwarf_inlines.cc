#include "symbolizer/dwarf_inlines.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>

#include "absl/strings/escaping.h"
#include "base/regular_file.h"
#include "symbolizer/build_id_index.h"

#include "symbolizer/elf_begin.h"

namespace gpuflame::symbolizer {
namespace {

constexpr int kMaxDepth = 64;          // nesting of scopes inside one function
constexpr int kMaxSiblings = 1 << 16;  // children looked at per scope
constexpr int kMaxUnits = 1 << 16;     // compile units scanned without aranges

std::string NameOf(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  // The linkage name carries namespaces and classes, and demangles the way
  // .symtab names do; C functions only have DW_AT_name.
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr))
      if (const char* s = dwarf_formstring(&attr)) return s;
  }
  const char* name = dwarf_diename(die);
  if (!name && dwarf_attr_integrate(die, DW_AT_name, &attr)) name = dwarf_formstring(&attr);
  return name ? name : "";
}

int64_t CallLine(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  Dwarf_Word line = 0;
  if (dwarf_attr(die, DW_AT_call_line, &attr) && dwarf_formudata(&attr, &line) == 0)
    return static_cast<int64_t>(line);
  return 0;
}

// The child of |scope| whose ranges hold |pc| and that can hold inlined
// calls (inlined_subroutine, lexical_block), searched depth first.
bool FindInlineChain(Dwarf_Die* scope, Dwarf_Addr pc, int depth, std::vector<Dwarf_Die>& chain) {
  if (depth > kMaxDepth) return false;
  Dwarf_Die child;
  if (dwarf_child(scope, &child) != 0) return false;
  int seen = 0;
  do {
    if (++seen > kMaxSiblings) return false;
    int tag = dwarf_tag(&child);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block) continue;
    if (dwarf_haspc(&child, pc) != 1) continue;
    if (tag == DW_TAG_inlined_subroutine) chain.push_back(child);
    FindInlineChain(&child, pc, depth + 1, chain);
    return true;
  } while (dwarf_siblingof(&child, &child) == 0);
  return false;
}

// The concrete (not abstract) subprogram of |cu| holding |pc|, searching
// through namespaces and classes that enclose definitions.
bool FindSubprogram(Dwarf_Die* scope, Dwarf_Addr pc, int depth, Dwarf_Die* out) {
  if (depth > 8) return false;
  Dwarf_Die child;
  if (dwarf_child(scope, &child) != 0) return false;
  int seen = 0;
  do {
    if (++seen > kMaxSiblings) return false;
    switch (dwarf_tag(&child)) {
      case DW_TAG_subprogram:
        if (dwarf_haspc(&child, pc) == 1) {
          *out = child;
          return true;
        }
        break;
      case DW_TAG_namespace:
      case DW_TAG_class_type:
      case DW_TAG_structure_type:
        if (FindSubprogram(&child, pc, depth + 1, out)) return true;
        break;
      default:
        break;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
  return false;
}

}  // namespace

struct DwarfInlines::Handles {
  HeldElf elf, alt_elf;  // ended after the Dwarf handles, in the destructor's wake
  Dwarf* dwarf = nullptr;
  Dwarf* alt = nullptr;  // dwz's shared file (dwarf_setalt: |dwarf| does not end it)
  ~Handles() {
    if (dwarf) dwarf_end(dwarf);
    if (alt) dwarf_end(alt);
  }
  // libdw opens, when first asked for a name that lives there, the file a
  // .gnu_debugaltlink names: by build ID under /usr/lib/debug, else by the
  // name itself, which the profiled process's file chose, with a blocking
  // open() in our mount namespace: a FIFO there holds the event loop. So it
  // is opened here, the way every such path is (base::OpenRegularFile), and
  // handed to libdw. False where the file names one and none opens: its
  // DWARF is then not used, since libdw would go looking later.
  bool SetAlt() {
    const char* name = nullptr;
    const void* id = nullptr;
    const ssize_t id_len = dwelf_dwarf_gnu_debugaltlink(dwarf, &name, &id);
    if (id_len == 0) return true;  // none: the common case
    if (id_len < 3 || id_len > 64) return false;
    const std::string hex =
        absl::BytesToHexString(absl::string_view(static_cast<const char*>(id), static_cast<size_t>(id_len)));
    base::ScopedFd fd = base::OpenRegularFile(BuildIdPath("/usr/lib/debug", hex) + ".debug");
    if (!fd && name && name[0] == '/') fd = base::OpenRegularFile(name);
    alt_elf = HeldElf::Begin(std::move(fd));
    if (alt_elf) alt = dwarf_begin_elf(alt_elf.get(), DWARF_C_READ, nullptr);
    if (!alt) return false;
    dwarf_setalt(dwarf, alt);
    return true;
  }
  // Split DWARF's skeleton units send libdw to their .dwo files, by the
  // directory and name the file gives, when their DIEs are read: such a
  // file's DWARF is not used (its inline scopes are in the .dwo anyway).
  bool HasSkeletonUnits() {
    Dwarf_CU* cu = nullptr;
    uint8_t unit_type = 0;
    for (int i = 0; i < kMaxUnits && dwarf_get_units(dwarf, cu, &cu, nullptr, &unit_type, nullptr, nullptr) == 0; i++)
      if (unit_type == DW_UT_skeleton) return true;
    return false;
  }
  // The compile unit holding |pc|: through .debug_aranges when present, else
  // by scanning unit ranges (GCC omits aranges for some units).
  bool UnitFor(Dwarf_Addr pc, Dwarf_Die* cu) {
    if (dwarf_addrdie(dwarf, pc, cu) != nullptr) return true;
    Dwarf_Off off = 0, next = 0;
    size_t header = 0;
    for (int i = 0; i < kMaxUnits && dwarf_nextcu(dwarf, off, &next, &header, nullptr, nullptr, nullptr) == 0;
         i++, off = next) {
      if (!dwarf_offdie(dwarf, off + header, cu)) continue;
      if (dwarf_haspc(cu, pc) == 1) return true;
    }
    return false;
  }
};

DwarfInlines::DwarfInlines(std::unique_ptr<Handles> h) : h_(std::move(h)) {}
DwarfInlines::~DwarfInlines() = default;

std::unique_ptr<DwarfInlines> DwarfInlines::Open(base::ScopedFd fd) {
  auto h = std::make_unique<Handles>();
  // Not dwarf_begin: it maps the file read-only (see elf_begin.h).
  h->elf = HeldElf::Begin(std::move(fd));
  if (!h->elf) return nullptr;
  h->dwarf = dwarf_begin_elf(h->elf.get(), DWARF_C_READ, nullptr);
  if (!h->dwarf) return nullptr;  // no .debug_info: the common pip-wheel case
  if (!h->SetAlt() || h->HasSkeletonUnits()) return nullptr;
  return std::unique_ptr<DwarfInlines>(new DwarfInlines(std::move(h)));
}

std::vector<SourceFrame> DwarfInlines::At(uint64_t vaddr) {
  std::vector<SourceFrame> out;
  Dwarf_Die cu, fn;
  if (!h_->UnitFor(vaddr, &cu) || !FindSubprogram(&cu, vaddr, 0, &fn)) return out;
  std::vector<Dwarf_Die> chain;
  FindInlineChain(&fn, vaddr, 0, chain);
  out.push_back({NameOf(&fn), 0});
  // Each frame's line is where it calls the next: the inlined call's
  // DW_AT_call_line. The innermost frame's line comes from the line table.
  for (Dwarf_Die& inl : chain) {
    out.back().line = CallLine(&inl);
    out.push_back({NameOf(&inl), 0});
  }
  if (Dwarf_Line* line = dwarf_getsrc_die(&cu, vaddr)) {
    int lineno = 0;
    if (dwarf_lineno(line, &lineno) == 0) out.back().line = lineno;
  }
  return out;
}

}  // namespace gpuflame::symbolizer
