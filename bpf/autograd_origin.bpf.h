/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backward attributed to its Python caller on the probes' path (the
 * workload does not load libgpuflame_cupti.so, whose GOT hook does the same
 * in-process): torch::autograd::Engine::execute's entry, on the thread that
 * called backward(), records that thread for the records of its process's
 * Python-less threads (lib/backward_callers.bpf.h says how, and why there is
 * no return probe). Once per backward() call.
 */
#ifndef GPUFLAME_BPF_AUTOGRAD_ORIGIN_BPF_H_
#define GPUFLAME_BPF_AUTOGRAD_ORIGIN_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gpuflame_abi.h"
#include "lib/backward_callers.bpf.h"
#include "lib/maps.bpf.h"
#include "lib/python_stack.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

static const struct gf_backward_calls gf_no_backward_calls;

SEC("uprobe")
int engine_execute(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32, tid = (__u32)id;
  if (!wanted(tgid))
    return 0;
  struct gf_py_proc *py = bpf_map_lookup_elem(&py_procs, &tgid);
  if (!py)
    return 0;
  __u32 flags = 0;
  __u64 tstate = gf_thread_state(py, &flags);
  __u64 frame = tstate ? gf_top_frame(py, tstate, &flags) : 0;
  __u64 code = frame ? gf_read_u64(frame + py->frame_code, &flags) : 0;
  if (!frame || flags)
    return 0; /* not called from Python (or its frame unreadable): no stack to lend */
  struct gf_backward_calls *calls = bpf_map_lookup_elem(&backward_calls, &tgid);
  if (!calls) {
    bpf_map_update_elem(&backward_calls, &tgid, &gf_no_backward_calls, BPF_NOEXIST);
    calls = bpf_map_lookup_elem(&backward_calls, &tgid);
    if (!calls)
      return 0;
  }
  /* This thread's slot (a loop calling backward() again), else a free one,
   * else one whose call has ended. */
  __u32 mine = GF_BACKWARD_SLOTS;
#pragma unroll
  for (int i = 0; i < GF_BACKWARD_SLOTS; i++)
    if (mine == GF_BACKWARD_SLOTS && calls->slot[i].tid == tid)
      mine = i;
  for (int i = 0; i < GF_BACKWARD_SLOTS && mine == GF_BACKWARD_SLOTS; i++) {
    __u32 owner = calls->slot[i].tid;
    if (owner && gf_backward_running(py, &calls->slot[i]))
      continue;
    if (__sync_val_compare_and_swap(&calls->slot[i].tid, owner, tid) == owner)
      mine = i;
  }
  if (mine >= GF_BACKWARD_SLOTS) {
    bump(GF_STAT_BACKWARD_UNTRACKED);
    return 0;
  }
  struct gf_backward_call *c = &calls->slot[mine & (GF_BACKWARD_SLOTS - 1)];
  /* Readers take a slot whose frame is 0 as not running: cleared first,
   * set last, so they never pair this call's frame with another's state. */
  c->frame = 0;
  asm volatile("" ::: "memory");
  c->tstate = tstate;
  c->code = code;
  asm volatile("" ::: "memory");
  c->frame = frame;
  bump(GF_STAT_BACKWARD_CALLS);
  return 0;
}

#endif /* GPUFLAME_BPF_AUTOGRAD_ORIGIN_BPF_H_ */
