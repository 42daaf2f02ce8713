// Which agents listen, as far as the process can tell: when one has just
// attached, what the library says only once (its tensor hook is live, each
// stack, each kernel name) must be said again. See GF_HELLO_SITES in
// bpf/gpuflame_abi.h for why the probes' own semaphores cannot tell.
#ifndef GPUFLAME_CUPTI_LISTENERS_H_
#define GPUFLAME_CUPTI_LISTENERS_H_

extern "C" {
// Exported (the agent finds them in .dynsym, also in a stripped library).
extern unsigned short gpuflame_hello_semaphore;
void gpuflame_hello_sites();  // never called: GF_HELLO_SITES nops, then ret
}

namespace gpuflame::cupti {

class ListenerWatch {
 public:
  // Each tick, on the flusher thread. |listening|: whether any of our
  // probes' semaphores is up now. True when an agent has attached since the
  // last call: the first to listen at all, or one more hello site taken.
  bool NewListener(bool listening);

 private:
  bool listening_ = false;
  unsigned short hellos_ = 0;
};

}  // namespace gpuflame::cupti

#endif  // GPUFLAME_CUPTI_LISTENERS_H_
