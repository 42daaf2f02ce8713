#include "symbolizer/elf_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/regular_file.h"
#include "base/scoped_fd.h"
#include "symbolizer/elf_begin.h"

namespace gpuflame::symbolizer {
namespace {

// Caps for untrusted files: libtorch_cuda has ~400k symbols; anything far
// beyond that is either broken or hostile.
constexpr size_t kMaxSymbols = 8'000'000;
constexpr size_t kMaxNameBytes = 512u << 20;
constexpr size_t kMaxSymbolName = 4096;
// libtorch_cpu's notes are a few KiB; Python's, Node's, a JVM's, tens.
constexpr size_t kMaxUsdtNoteBytes = 4u << 20;

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};

// An x86-64 ELF file opened for libelf (mapped, read lazily).
struct OpenedElf {
  base::ScopedFd fd;  // before |elf|, so closed after it: libelf reads through it until elf_end
  std::unique_ptr<Elf, ElfCloser> elf;
  GElf_Ehdr ehdr;
};

absl::StatusOr<OpenedElf> OpenX86Elf(const std::string& path) {
  OpenedElf o;
  // Paths come from profiled processes' views: never open a FIFO or device.
  o.fd = base::OpenRegularFile(path);
  if (!o.fd) return absl::NotFoundError(absl::StrCat("cannot open ", path, " as a regular file"));
  o.elf.reset(BeginElf(o.fd.get()));
  if (!o.elf || elf_kind(o.elf.get()) != ELF_K_ELF)
    return absl::InvalidArgumentError(absl::StrCat(path, " is not an ELF file"));
  if (!gelf_getehdr(o.elf.get(), &o.ehdr) || o.ehdr.e_machine != EM_X86_64)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an x86-64 ELF file"));
  return o;
}

std::vector<LoadSegment> LoadSegments(Elf* elf) {
  std::vector<LoadSegment> loads;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) phnum = 0;
  for (size_t i = 0; i < phnum && i < 4096; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph)) continue;
    if (ph.p_type == PT_LOAD)
      loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0});
  }
  return loads;
}

std::optional<uint64_t> OffsetOf(const std::vector<LoadSegment>& loads, uint64_t vaddr) {
  for (const LoadSegment& l : loads)
    if (vaddr >= l.vaddr && vaddr < l.vaddr + l.filesz) return vaddr - l.vaddr + l.offset;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<ElfFile> ElfFile::Open(const std::string& path) {
  auto opened = OpenX86Elf(path);
  if (!opened.ok()) return opened.status();
  Elf* elf = opened->elf.get();

  ElfFile out;
  out.path_ = path;
  out.is_exec_ = opened->ehdr.e_type == ET_EXEC;
  out.loads_ = LoadSegments(elf);

  size_t names = 0;
  const bool have_names = elf_getshdrstrndx(elf, &names) == 0;
  auto name_of = [&](const GElf_Shdr& sh) -> std::string_view {
    const char* n = have_names ? elf_strptr(elf, names, sh.sh_name) : nullptr;
    return n ? std::string_view(n, strnlen(n, 64)) : std::string_view();
  };
  Elf_Scn* scn = nullptr;
  size_t sections = 0;
  while ((scn = elf_nextscn(elf, scn)) != nullptr && sections++ < 65536) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type == SHT_NOTE && name_of(sh) == ".note.stapsdt") {
      // USDT probes: kept raw, parsed by whoever attaches them.
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data && data->d_buf && data->d_size <= kMaxUsdtNoteBytes && out.usdt_notes_.empty())
        out.usdt_notes_.assign(static_cast<const char*>(data->d_buf), data->d_size);  // the first, as libbpf
      continue;
    }
    if (sh.sh_type == SHT_PROGBITS && name_of(sh) == ".stapsdt.base") {
      out.usdt_base_ = sh.sh_addr;
      continue;
    }
    if (sh.sh_type == SHT_NOTE && out.build_id_.empty()) {
      Elf_Data* data = elf_getdata(scn, nullptr);
      size_t off = 0, name_off = 0, desc_off = 0;
      GElf_Nhdr nh;
      while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && desc_off + nh.n_descsz <= data->d_size &&
            std::memcmp(static_cast<char*>(data->d_buf) + name_off, "GNU", 4) == 0) {
          static const char kHex[] = "0123456789abcdef";
          const auto* d = static_cast<const unsigned char*>(data->d_buf) + desc_off;
          for (size_t j = 0; j < nh.n_descsz && j < 64; j++) {
            out.build_id_ += kHex[d[j] >> 4];
            out.build_id_ += kHex[d[j] & 15];
          }
          break;
        }
      }
      continue;
    }
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    bool exported = sh.sh_type == SHT_DYNSYM;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || sh.sh_entsize == 0) continue;
    size_t count = std::min<size_t>(sh.sh_size / sh.sh_entsize, kMaxSymbols);
    for (size_t j = 0; j < count && out.symbols_.size() < kMaxSymbols; j++) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(j), &sym)) break;
      int type = GELF_ST_TYPE(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
      if (type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC && type != STT_TLS) continue;
      if (type == STT_TLS) continue;  // TLS offsets are not addresses
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!name || !*name) continue;
      size_t len = strnlen(name, kMaxSymbolName);
      if (out.names_.size() + len + 1 > kMaxNameBytes) break;
      auto offset = static_cast<uint32_t>(out.names_.size());
      out.names_.append(name, len);
      out.names_.push_back('\0');
      out.symbols_.push_back({sym.st_value, sym.st_size, offset, exported});
    }
  }
  std::sort(out.symbols_.begin(), out.symbols_.end(), [](const Symbol& a, const Symbol& b) {
    return a.start != b.start ? a.start < b.start : a.exported > b.exported;
  });
  return out;
}

std::optional<uint64_t> ElfFile::ExportedFunctionOffset(const std::string& path, std::string_view name) {
  auto opened = OpenX86Elf(path);
  if (!opened.ok()) return std::nullopt;
  Elf* elf = opened->elf.get();
  std::optional<uint64_t> vaddr;
  Elf_Scn* scn = nullptr;
  size_t sections = 0;
  while (!vaddr && (scn = elf_nextscn(elf, scn)) != nullptr && sections++ < 65536) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    // Names are compared in place (the file is mapped): nothing is copied or sorted.
    const size_t count = std::min<size_t>(sh.sh_size / sh.sh_entsize, kMaxSymbols);
    for (size_t j = 0; j < count; j++) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(j), &sym)) break;
      if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0 || GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
      const char* s = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (s && strnlen(s, kMaxSymbolName) == name.size() && std::memcmp(s, name.data(), name.size()) == 0) {
        vaddr = sym.st_value;
        break;
      }
    }
  }
  return vaddr ? OffsetOf(LoadSegments(elf), *vaddr) : std::nullopt;
}

std::string_view ElfFile::NameOf(const Symbol& s) const { return std::string_view(names_.data() + s.name_offset); }

std::optional<uint64_t> ElfFile::FindSymbol(std::string_view name) const {
  for (const Symbol& s : symbols_)
    if (NameOf(s) == name) return s.start;
  return std::nullopt;
}

bool ElfFile::Exports(std::string_view name) const {
  for (const Symbol& s : symbols_)
    if (s.exported && NameOf(s) == name) return true;
  return false;
}

std::optional<ElfFile::Hit> ElfFile::Lookup(uint64_t vaddr) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                             [](uint64_t v, const Symbol& s) { return v < s.start; });
  // Walk back over zero-sized or non-covering neighbours a little: aliases
  // share a start, and the covering symbol is the nearest one whose size
  // reaches |vaddr|.
  for (int steps = 0; it != symbols_.begin() && steps < 64; steps++) {
    --it;
    if (vaddr < it->start + std::max<uint64_t>(it->size, 1)) return Hit{NameOf(*it), it->start};
    if (it->size != 0) break;
  }
  return std::nullopt;
}

std::optional<uint64_t> ElfFile::VaddrToOffset(uint64_t vaddr) const { return OffsetOf(loads_, vaddr); }

std::optional<uint64_t> ElfFile::CodeVaddrToOffset(uint64_t vaddr) const {
  for (const LoadSegment& l : loads_)
    if (l.executable && vaddr >= l.vaddr && vaddr < l.vaddr + l.filesz) return vaddr - l.vaddr + l.offset;
  return std::nullopt;
}

std::optional<uint64_t> ElfFile::LoadBias(uint64_t map_start, uint64_t map_offset) const {
  if (is_exec_) return 0;
  constexpr uint64_t kPage = 4096;
  for (const LoadSegment& l : loads_) {
    uint64_t seg_off = l.offset & ~(kPage - 1);
    if (seg_off == map_offset) return map_start - (l.vaddr & ~(kPage - 1));
  }
  return std::nullopt;
}

std::optional<std::string> ElfFile::ReadVaddr(uint64_t vaddr, size_t len) const {
  auto off = VaddrToOffset(vaddr);
  if (!off || len > (1u << 20)) return std::nullopt;
  base::ScopedFd fd = base::OpenRegularFile(path_);
  if (!fd) return std::nullopt;
  std::string buf(len, '\0');
  ssize_t got = pread(fd.get(), buf.data(), len, static_cast<off_t>(*off));
  if (got != static_cast<ssize_t>(len)) return std::nullopt;
  return buf;
}

size_t ElfFile::MemoryUsage() const {
  return sizeof(*this) + symbols_.capacity() * sizeof(Symbol) + names_.capacity() +
         loads_.capacity() * sizeof(LoadSegment) + usdt_notes_.capacity();
}

}  // namespace gpuflame::symbolizer
