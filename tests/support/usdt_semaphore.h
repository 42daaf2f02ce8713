// A USDT semaphore raised by hand, as the kernel raises it when a tracer
// attaches to the probe: tests and benchmarks of libgpuflame_cupti.so on the
// simulated CUDA runtime make the library believe an agent listens, with no
// BPF and no root.
#ifndef GPUFLAME_TESTS_SUPPORT_USDT_SEMAPHORE_H_
#define GPUFLAME_TESTS_SUPPORT_USDT_SEMAPHORE_H_

#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace gpuflame::testing {

// Where the loader put |path|'s first byte, or 0.
inline uintptr_t LoadBase(const std::string& path) {
  char want[PATH_MAX];
  if (!realpath(path.c_str(), want)) return 0;
  std::pair<const char*, uintptr_t> arg{want, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* p) {
        auto* a = static_cast<std::pair<const char*, uintptr_t>*>(p);
        char got[PATH_MAX];
        if (!info->dlpi_name || !*info->dlpi_name || !realpath(info->dlpi_name, got) || std::strcmp(got, a->first) != 0)
          return 0;
        a->second = info->dlpi_addr;
        return 1;
      },
      &arg);
  return arg.second;
}

// A symbol's address in the library file (.symtab: the semaphores are not
// exported), or 0.
inline uint64_t SymbolValue(const std::string& path, const char* name) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream buf;
  buf << f.rdbuf();
  const std::string elf = buf.str();
  if (elf.size() < sizeof(Elf64_Ehdr)) return 0;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(elf.data());
  if (eh->e_shoff + uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) > elf.size()) return 0;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(elf.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strtab = sh[sh[i].sh_link];
    // A truncated or odd file: its tables must lie inside it.
    if (sh[i].sh_offset > elf.size() || sh[i].sh_size > elf.size() - sh[i].sh_offset || strtab.sh_offset > elf.size() ||
        strtab.sh_size > elf.size() - strtab.sh_offset)
      continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(elf.data() + sh[i].sh_offset);
    for (size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); j++)
      if (syms[j].st_name < strtab.sh_size && std::strcmp(elf.data() + strtab.sh_offset + syms[j].st_name, name) == 0)
        return syms[j].st_value;
  }
  return 0;
}

// What the kernel does to a USDT semaphore when a tracer attaches: raises
// |name| in the copy of |library| this process has loaded (by |by|: -1 is
// the tracer's leaving).
inline bool RaiseSemaphore(const std::string& library, const char* name, short by = 1) {
  const uintptr_t base = LoadBase(library);
  const uint64_t at = SymbolValue(library, name);
  if (!base || !at) return false;
  __atomic_add_fetch(reinterpret_cast<unsigned short*>(base + at), static_cast<unsigned short>(by), __ATOMIC_RELAXED);
  return true;
}

// What the kernel does when that tracer leaves.
inline bool LowerSemaphore(const std::string& library, const char* name) { return RaiseSemaphore(library, name, -1); }

}  // namespace gpuflame::testing

#endif  // GPUFLAME_TESTS_SUPPORT_USDT_SEMAPHORE_H_
