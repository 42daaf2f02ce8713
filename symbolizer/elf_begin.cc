#include "symbolizer/elf_begin.h"

namespace gpuflame::symbolizer {

Elf* BeginElf(int fd) {
  if (elf_version(EV_CURRENT) == EV_NONE) return nullptr;
  return elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, nullptr);
}

}  // namespace gpuflame::symbolizer
