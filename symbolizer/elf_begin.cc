#include "symbolizer/elf_begin.h"

namespace gpuflame::symbolizer {

Elf* BeginElf(int fd) {
  if (elf_version(EV_CURRENT) == EV_NONE) return nullptr;
  return elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, nullptr);
}

Elf* BeginElfDetached(base::ScopedFd fd) {
  if (!fd) return nullptr;
  Elf* elf = BeginElf(fd.get());
  if (!elf) return nullptr;
  if (elf_kind(elf) != ELF_K_ELF || elf_cntl(elf, ELF_C_FDDONE) != 0) {
    elf_end(elf);
    return nullptr;
  }
  return elf;  // |fd| closes on return
}

}  // namespace gpuflame::symbolizer
