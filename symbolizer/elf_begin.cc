#include "symbolizer/elf_begin.h"

namespace gpuflame::symbolizer {

Elf* BeginElf(int fd) {
  if (elf_version(EV_CURRENT) == EV_NONE) return nullptr;
  return elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, nullptr);
}

HeldElf HeldElf::Begin(base::ScopedFd fd) {
  HeldElf held;
  if (!fd) return held;
  held.elf_ = BeginElf(fd.get());
  if (!held.elf_ || elf_kind(held.elf_) != ELF_K_ELF) {
    held.Reset();
    return held;
  }
  // Detached, a handle whose file libelf mapped reads its first bytes from
  // the mapping; one it could not map would read through the descriptor and
  // now fails. Such a handle is begun again with the descriptor kept.
  if (elf_cntl(held.elf_, ELF_C_FDDONE) == 0 && elf_getdata_rawchunk(held.elf_, 0, 1, ELF_T_BYTE) != nullptr)
    return held;  // |fd| closes on return
  held.Reset();
  held.elf_ = BeginElf(fd.get());
  if (!held.elf_) return held;
  held.fd_ = std::move(fd);
  return held;
}

void HeldElf::Reset() {
  if (elf_) elf_end(std::exchange(elf_, nullptr));
  fd_.reset();  // after elf_end: libelf may read through it until then
}

}  // namespace gpuflame::symbolizer
