#include "cupti/listeners.h"

#include "bpf/gpuflame_abi.h"
#include "inprocess/nop_sites.h"

extern "C" {
__extension__ __attribute__((visibility("default"), section(".probes"), used))
unsigned short gpuflame_hello_semaphore;
}

// Never executed: an agent attaches to one (GF_HELLO_SITES).
GF_NOP_SITES(gpuflame_hello_sites, GF_HELLO_SITES);

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
