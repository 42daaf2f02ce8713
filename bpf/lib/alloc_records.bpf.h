/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ALLOC and FREE records, shared by the CUDA and PyTorch allocator probes:
 * an allocation carries a stack (or points at the one its call's entry sent),
 * a free never does.
 */
#ifndef GPUFLAME_BPF_LIB_ALLOC_RECORDS_BPF_H_
#define GPUFLAME_BPF_LIB_ALLOC_RECORDS_BPF_H_

#include "config.bpf.h"
#include "emit.bpf.h"
#include "stacks.bpf.h"

/* Emits an allocation with the calling thread's stack. */
static __always_inline void submit_with_stack(void *ctx, __u8 domain, __u16 api, __u32 flags,
                                              __u64 addr, __u64 size, __u64 arg0, __u64 arg1,
                                              __u64 arg2) {
  if (flags & GF_EVF_STACK_AT_ENTRY) {
    /* The stacks were sent at the call's entry: this record only points there. */
    struct gf_event ev;
    fill_header(&ev, GF_EV_ALLOC, domain, api, addr, size);
    ev.flags = flags;
    ev.arg0 = arg0;
    ev.arg1 = arg1;
    ev.arg2 = arg2;
    emit(&ev, sizeof(ev), false);
    return;
  }
  if (want_user_stack(2)) {
    submit_with_user_stack(ctx, GF_EV_ALLOC, domain, api, flags, addr, size, arg0, arg1, arg2);
    return;
  }
  submit_stack_kind(ctx, GF_EV_ALLOC, domain, api, flags, addr, size, arg0, arg1, arg2);
}

static __always_inline void submit_free(__u8 domain, __u16 api, __u32 flags, __u64 addr) {
  struct gf_event ev;
  fill_header(&ev, GF_EV_FREE, domain, api, addr, 0);
  ev.flags = flags;
  submit_small(&ev);
}

#endif /* GPUFLAME_BPF_LIB_ALLOC_RECORDS_BPF_H_ */
