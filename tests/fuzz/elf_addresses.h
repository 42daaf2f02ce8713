// Addresses in the code of an ELF file, for the fuzz targets that look
// things up by address (CFI rows, DWARF inlines): spread over every
// executable section the section headers name, and the header's entry
// point, read with libelf independently of the code under test.
#ifndef GPUFLAME_TESTS_FUZZ_ELF_ADDRESSES_H_
#define GPUFLAME_TESTS_FUZZ_ELF_ADDRESSES_H_

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuflame::fuzz {

inline constexpr size_t kMaxAddresses = 512;
inline constexpr size_t kPerSection = 48;

inline std::vector<uint64_t> CodeAddresses(int fd) {
  std::vector<uint64_t> out;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (!elf) return out;
  GElf_Ehdr eh;
  if (gelf_getehdr(elf, &eh)) out.push_back(eh.e_entry);
  Elf_Scn* scn = nullptr;
  for (size_t sections = 0; (scn = elf_nextscn(elf, scn)) != nullptr && sections < 256; sections++) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) || sh.sh_size == 0) continue;
    const uint64_t step = std::max<uint64_t>(1, sh.sh_size / kPerSection);
    for (uint64_t off = 0; off < sh.sh_size && out.size() < kMaxAddresses; off += step) out.push_back(sh.sh_addr + off);
    out.push_back(sh.sh_addr + sh.sh_size - 1);
  }
  elf_end(elf);
  if (out.size() > kMaxAddresses) out.resize(kMaxAddresses);
  return out;
}

}  // namespace gpuflame::fuzz

#endif  // GPUFLAME_TESTS_FUZZ_ELF_ADDRESSES_H_
