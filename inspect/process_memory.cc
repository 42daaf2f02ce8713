#include "inspect/process_memory.h"

#include <sys/uio.h>

namespace gpuflame::inspect {

bool RemoteProcessMemory::Read(uint64_t addr, void* out, size_t len) const {
  if (len == 0) return true;
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  ssize_t got = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  return got == static_cast<ssize_t>(len);
}

}  // namespace gpuflame::inspect
