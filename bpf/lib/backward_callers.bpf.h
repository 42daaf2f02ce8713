/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whom a thread without Python frames works for: the threads of its process
 * blocked in torch::autograd::Engine::execute (loss.backward(),
 * torch.autograd.grad). That call releases the GIL and waits, its Python
 * frames intact, while autograd's engine threads (one per device, an idle
 * thread state of their own) allocate and launch the device work.
 *
 * The entry probe (bpf/autograd_origin.bpf.h) records each caller: its
 * thread state and the innermost Python frame it entered with. There is no
 * return probe: a uretprobe replaces the return address on the stack, and a
 * C++ exception unwinding through that frame (a backward() that raises, an
 * OOM caught in Python) would find no unwind info there and terminate the
 * workload. So a recorded call counts as running only while its thread's
 * innermost frame is still the one it entered with (same address, same code
 * object): when backward() returns or raises, that frame is popped.
 *
 * A few slots per process, claimed with compare-and-swap (several threads
 * may call backward() at once); a slot whose call has ended is reused.
 */
#ifndef GPUFLAME_BPF_LIB_BACKWARD_CALLERS_BPF_H_
#define GPUFLAME_BPF_LIB_BACKWARD_CALLERS_BPF_H_

#include "vmlinux_min.h"

#include <bpf/bpf_helpers.h>

#include "gpuflame_abi.h"
#include "python_stack.bpf.h"

#define GF_BACKWARD_SLOTS 8 /* a power of two */

struct gf_backward_call {
  __u32 tid; /* 0: free */
  __u32 pad;
  __u64 tstate;
  __u64 frame; /* 0 while the slot is being written: not running */
  __u64 code;
};

struct gf_backward_calls {
  struct gf_backward_call slot[GF_BACKWARD_SLOTS];
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, struct gf_backward_calls);
} backward_calls SEC(".maps");

/* Whether the call recorded in |c| still runs (two or three reads of the
 * caller's memory). */
static __always_inline bool gf_backward_running(const struct gf_py_proc *cfg, const struct gf_backward_call *c) {
  __u64 frame = c->frame;
  if (!c->tid || !frame)
    return false;
  __u32 flags = 0;
  if (gf_top_frame(cfg, c->tstate, &flags) != frame)
    return false;
  __u64 code = gf_read_u64(frame + cfg->frame_code, &flags);
  return !flags && code == c->code;
}

/* How many backward() calls of |tgid| run now, other than the calling
 * thread's own; with exactly one, *tstate is its caller's thread state. */
static __always_inline __u32 gf_backward_callers(const struct gf_py_proc *cfg, __u32 tgid, __u32 self_tid,
                                                 __u64 *tstate) {
  struct gf_backward_calls *calls = bpf_map_lookup_elem(&backward_calls, &tgid);
  if (!calls)
    return 0;
  __u32 running = 0;
#pragma unroll
  for (int i = 0; i < GF_BACKWARD_SLOTS; i++) {
    const struct gf_backward_call *c = &calls->slot[i];
    if (c->tid != self_tid && gf_backward_running(cfg, c)) {
      running++;
      *tstate = c->tstate;
    }
  }
  return running;
}

#endif /* GPUFLAME_BPF_LIB_BACKWARD_CALLERS_BPF_H_ */
