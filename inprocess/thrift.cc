#include "inprocess/thrift.h"

#include "bpf/gpuflame_abi.h"
#include "inprocess/nop_sites.h"

extern "C" {
__extension__ __attribute__((visibility("default"), section(".probes"), used)) unsigned short gpuflame_thrift_semaphore;
}

// Never executed: an agent at thrift level k holds the first k.
GF_NOP_SITES(gpuflame_thrift_sites, GF_THRIFT_SITES);

namespace gpuflame::inprocess {

uint32_t ThriftLevel() {
  const unsigned short count = __atomic_load_n(&gpuflame_thrift_semaphore, __ATOMIC_RELAXED);
  return count < GF_THRIFT_SITES ? count : GF_THRIFT_SITES;
}

}  // namespace gpuflame::inprocess
