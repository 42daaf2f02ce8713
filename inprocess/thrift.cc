#include "inprocess/thrift.h"

#include "bpf/gpuflame_abi.h"

extern "C" {
__extension__ __attribute__((visibility("default"), section(".probes"), used)) unsigned short gpuflame_thrift_semaphore;
}

// In assembly, as the hello sites are (cupti/listeners.cc): each site one
// instruction at a fixed stride, which no compiler promises for a C++ body.
// Never executed.
#define GF_THRIFT_STR2(x) #x
#define GF_THRIFT_STR(x) GF_THRIFT_STR2(x)
asm(".pushsection .text.gpuflame_thrift,\"ax\",%progbits\n"
    ".globl gpuflame_thrift_sites\n"
    ".type gpuflame_thrift_sites, %function\n"
    "gpuflame_thrift_sites:\n"
    ".rept " GF_THRIFT_STR(GF_THRIFT_SITES) "\n"
    "nop\n"
    ".endr\n"
    "ret\n"
    ".size gpuflame_thrift_sites, . - gpuflame_thrift_sites\n"
    ".popsection\n");

namespace gpuflame::inprocess {

uint32_t ThriftLevel() {
  const unsigned short count = __atomic_load_n(&gpuflame_thrift_semaphore, __ATOMIC_RELAXED);
  return count < GF_THRIFT_SITES ? count : GF_THRIFT_SITES;
}

}  // namespace gpuflame::inprocess
