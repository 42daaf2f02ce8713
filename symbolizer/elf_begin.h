#pragma once

#include <libelf.h>

#include <utility>

#include "base/scoped_fd.h"

namespace gpuflame::symbolizer {

// libelf's handle on an ELF file gpuflame reads (symbols, CFI, DWARF):
// mapped privately *writable* (ELF_C_READ_MMAP_PRIVATE), never read-only.
//
// Why: the kernel puts a file-wide uprobe's breakpoint into every private
// read-only mapping of the probed file, in every process -- gpuflame's own
// mappings of the libraries it probes included -- and raises a semaphore
// (a USDT's, the injection library's hello) in whatever writable mapping of
// that file the same process holds at that moment. libdwfl maps the same
// files privately writable for the native unwinder, and opens and drops
// them with its processes: a breakpoint counted in one of its mappings and
// removed while another was there sent the count negative, and the kernel
// then leaks the uprobe ("failed to unregister, leaking uprobe"). The kernel
// never puts a breakpoint into a writable private mapping, so gpuflame's
// own mappings stay out of the count. Pages are copied only when written,
// which libelf does only to a section it decompresses.
//
// nullptr where libelf refuses |fd|; the caller keeps |fd| open until
// elf_end.
Elf* BeginElf(int fd);

// A libelf handle kept long (a table read lazily, or shared with libdwfl),
// owned. Its descriptor is closed once libelf has mapped the file, since
// libelf reads nothing through it after and one held per file for the
// agent's lifetime adds up; it is kept only where the mapping failed
// (ENOMEM, vm.max_map_count), so that such a handle still reads.
class HeldElf {
 public:
  // Empty where libelf refuses the file or it is no ELF object.
  static HeldElf Begin(base::ScopedFd fd);
  HeldElf() = default;
  HeldElf(HeldElf&& o) noexcept : fd_(std::move(o.fd_)), elf_(std::exchange(o.elf_, nullptr)) {}
  HeldElf& operator=(HeldElf&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::move(o.fd_);
      elf_ = std::exchange(o.elf_, nullptr);
    }
    return *this;
  }
  ~HeldElf() { Reset(); }
  Elf* get() const { return elf_; }
  explicit operator bool() const { return elf_ != nullptr; }

 private:
  void Reset();
  base::ScopedFd fd_;  // valid only where libelf could not map the file
  Elf* elf_ = nullptr;
};

}  // namespace gpuflame::symbolizer
