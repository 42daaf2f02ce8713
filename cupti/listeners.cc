#include "cupti/listeners.h"

#include "bpf/gpuflame_abi.h"

extern "C" {
__extension__ __attribute__((visibility("default"), section(".probes"), used))
unsigned short gpuflame_hello_semaphore;
}

// Written in assembly: each site must be one instruction at a fixed stride,
// which no compiler promises for a C++ body. Never executed.
#define GF_STR2(x) #x
#define GF_STR(x) GF_STR2(x)
asm(".pushsection .text.gpuflame_hello,\"ax\",%progbits\n"
    ".globl gpuflame_hello_sites\n"
    ".type gpuflame_hello_sites, %function\n"
    "gpuflame_hello_sites:\n"
    ".rept " GF_STR(GF_HELLO_SITES) "\n"
    "nop\n"
    ".endr\n"
    "ret\n"
    ".size gpuflame_hello_sites, . - gpuflame_hello_sites\n"
    ".popsection\n");

namespace gpuflame::cupti {

bool ListenerWatch::NewListener(bool listening) {
  const unsigned short hellos = __atomic_load_n(&gpuflame_hello_semaphore, __ATOMIC_RELAXED);
  // A count that falls is an agent leaving; one that rises, even while
  // another agent listens, is a newcomer.
  const bool first = listening && !listening_;
  const bool more = hellos > hellos_;
  listening_ = listening;
  hellos_ = hellos;
  return first || more;
}

}  // namespace gpuflame::cupti
