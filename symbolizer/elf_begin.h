#pragma once

#include <libelf.h>

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

// The same for a handle kept long (a table read lazily, or shared with
// libdwfl): |fd| is closed once the file is mapped, since libelf reads
// nothing through it after, and a descriptor held per file for the agent's
// lifetime would add up. Where the mapping failed, the handle's later reads
// fail (ELF_E_FD_DISABLED) rather than reading the whole file into memory.
// nullptr where libelf refuses the file or it is no ELF object.
Elf* BeginElfDetached(base::ScopedFd fd);

}  // namespace gpuflame::symbolizer
