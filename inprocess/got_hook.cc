#include "inprocess/got_hook.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace gpuflame::inprocess {
namespace {

struct Library {
  const char* prefix;
  const char* name = nullptr;  // full path, as the loader recorded it
  ElfW(Addr) base = 0;
  const ElfW(Dyn) * dynamic = nullptr;
};

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int FindLibrary(dl_phdr_info* info, size_t, void* arg) {
  auto* lib = static_cast<Library*>(arg);
  if (!info->dlpi_name || std::strncmp(Basename(info->dlpi_name), lib->prefix, std::strlen(lib->prefix)) != 0) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    lib->name = info->dlpi_name;
    lib->base = info->dlpi_addr;
    lib->dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return 1;
  }
  return 0;
}

// glibc relocates the address-valued dynamic entries in place on x86-64;
// loaders that keep .dynamic read-only (and a few architectures) do not.
ElfW(Addr) Absolute(const Library& lib, ElfW(Addr) v) { return v < lib.base ? v + lib.base : v; }

// The protection of the page holding |addr|, from our own /proc/self/maps
// (a GOT under RELRO is read-only; without RELRO it is writable already).
int ProtectionOf(uintptr_t addr) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return -1;
  char line[512];
  int prot = -1;
  for (int lines = 0; lines < 100000 && std::fgets(line, sizeof(line), f); lines++) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    if (addr < lo || addr >= hi) continue;
    prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
    break;
  }
  std::fclose(f);
  return prot;
}

bool WriteSlot(void** slot, void* value) {
  const long page = sysconf(_SC_PAGESIZE);
  auto addr = reinterpret_cast<uintptr_t>(slot);
  int prot = ProtectionOf(addr);
  if (prot < 0) return false;
  void* start = reinterpret_cast<void*>(addr & ~static_cast<uintptr_t>(page - 1));
  if (!(prot & PROT_WRITE) && mprotect(start, static_cast<size_t>(page), prot | PROT_WRITE) != 0) return false;
  // One aligned pointer store: a concurrent caller sees the old or the new
  // target, both valid.
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  if (!(prot & PROT_WRITE)) mprotect(start, static_cast<size_t>(page), prot);
  return true;
}

}  // namespace

bool RestoreGotSlot(void** slot, void* value) {
  if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == value) return false;
  return WriteSlot(slot, value);
}

namespace {

// The library's dynamic tables, as the loader relocated them.
struct DynamicTables {
  ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0;
  size_t strsz = 0, pltrelsz = 0, relasz = 0;
};

DynamicTables ReadDynamic(const Library& lib) {
  DynamicTables t;
  // The dynamic array ends at DT_NULL; bounded all the same.
  for (int i = 0; i < 4096 && lib.dynamic[i].d_tag != DT_NULL; i++) {
    const ElfW(Dyn)& d = lib.dynamic[i];
    switch (d.d_tag) {
      case DT_SYMTAB: t.symtab = Absolute(lib, d.d_un.d_ptr); break;
      case DT_STRTAB: t.strtab = Absolute(lib, d.d_un.d_ptr); break;
      case DT_STRSZ: t.strsz = d.d_un.d_val; break;
      case DT_JMPREL: t.jmprel = Absolute(lib, d.d_un.d_ptr); break;
      case DT_PLTRELSZ: t.pltrelsz = d.d_un.d_val; break;
      case DT_RELA: t.rela = Absolute(lib, d.d_un.d_ptr); break;
      case DT_RELASZ: t.relasz = d.d_un.d_val; break;
      default: break;
    }
  }
  return t;
}

// Calls |fn(slot)| for every GOT slot bound to a symbol whose name starts
// with |name| (its whole name when |whole|), until it returns false.
template <typename Fn>
void ForEachSlot(const Library& lib, const DynamicTables& t, const char* name, bool whole, Fn fn) {
  const size_t name_len = std::strlen(name);
  const size_t compare = whole ? name_len + 1 : name_len;
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(t.symtab);
  const char* strings = reinterpret_cast<const char*>(t.strtab);
  // PLT calls bind through JUMP_SLOTs (.rela.plt); -fno-plt calls and
  // address-taken uses through GLOB_DATs (.rela.dyn).
  for (auto [table, bytes] : {std::pair{t.jmprel, t.pltrelsz}, std::pair{t.rela, t.relasz}}) {
    if (!table) continue;
    const auto* rels = reinterpret_cast<const ElfW(Rela)*>(table);
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); i++) {
      const auto type = ELF64_R_TYPE(rels[i].r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const ElfW(Word) at = syms[ELF64_R_SYM(rels[i].r_info)].st_name;
      if (t.strsz && (at >= t.strsz || t.strsz - at < compare)) continue;
      if (std::memcmp(strings + at, name, compare) != 0) continue;
      if (!fn(reinterpret_cast<void**>(lib.base + rels[i].r_offset))) return;
    }
  }
}

}  // namespace

bool GotHasSymbolWithPrefix(const char* library_prefix, const char* symbol_prefix) {
  Library lib{library_prefix};
  if (!dl_iterate_phdr(FindLibrary, &lib) || !lib.dynamic) return false;
  const DynamicTables t = ReadDynamic(lib);
  if (!t.symtab || !t.strtab) return false;
  bool found = false;
  ForEachSlot(lib, t, symbol_prefix, /*whole=*/false, [&](void**) {
    found = true;
    return false;
  });
  return found;
}

GotHookResult HookGot(const char* library_prefix, const char* symbol, void* replacement, OriginalSink sink) {
  GotHookResult out;
  Library lib{library_prefix};
  if (!dl_iterate_phdr(FindLibrary, &lib) || !lib.dynamic) {
    out.error = std::string(library_prefix) + " is not loaded";
    return out;
  }
  const DynamicTables t = ReadDynamic(lib);
  if (!t.symtab || !t.strtab) {
    out.error = std::string(lib.name) + " has no dynamic symbol table";
    return out;
  }
  void* handle = dlopen(lib.name, RTLD_NOW | RTLD_NOLOAD);
  out.original = handle ? dlsym(handle, symbol) : nullptr;
  if (handle) dlclose(handle);
  if (!out.original) {
    out.error = std::string(lib.name) + " cannot resolve " + symbol;
    return out;
  }
  sink(out.original);
  ForEachSlot(lib, t, symbol, /*whole=*/true, [&](void** slot) {
    if (!WriteSlot(slot, replacement)) {
      out.write_failed = true;
      return false;
    }
    if (out.slots < kMaxGotSlots) out.slot[out.slots] = slot;
    out.slots++;
    return true;
  });
  if (out.write_failed) {
    out.error = std::string("cannot make the GOT of ") + lib.name + " writable";
    return out;
  }
  if (out.slots == 0) out.error = std::string(lib.name) + " has no GOT slot for " + symbol;
  return out;
}

}  // namespace gpuflame::inprocess
