/* SPDX-License-Identifier: Apache-2.0 */
/* Records out to user space: the common header, and the ring-buffer output. */
#ifndef GPUFLAME_BPF_LIB_EMIT_BPF_H_
#define GPUFLAME_BPF_LIB_EMIT_BPF_H_

#include "config.bpf.h"
#include "maps.bpf.h"
#include "stats.bpf.h"

static __always_inline void fill_header(struct gf_event *ev, __u8 kind, __u8 domain, __u16 api,
                                        __u64 addr, __u64 size) {
  __u64 id = bpf_get_current_pid_tgid();
  ev->kind = kind;
  ev->domain = domain;
  ev->api = api;
  ev->flags = 0;
  ev->pid = id >> 32;
  ev->tid = (__u32)id;
  ev->ts_ns = bpf_ktime_get_ns();
  ev->addr = addr;
  ev->size = size;
  ev->arg0 = 0;
  ev->arg1 = 0;
  ev->arg2 = 0;
  ev->py_count = 0;
  ev->native_count = 0;
  ev->user_stack_len = 0;
  ev->backward_calls = 0;
}

static __always_inline __u64 wakeup_flags(bool urgent) {
  if (urgent || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes)
    return BPF_RB_FORCE_WAKEUP;
  return BPF_RB_NO_WAKEUP;
}

/* Hands |len| bytes to user space; a full ring buffer is counted, never silent. */
static __always_inline bool emit(void *data, __u64 len, bool urgent) {
  if (bpf_ringbuf_output(&events, data, len, wakeup_flags(urgent))) {
    bump(GF_STAT_RINGBUF_FULL);
    return false;
  }
  bump(GF_STAT_EVENTS);
  return true;
}

/* A header-only record. */
static __always_inline void submit_small(struct gf_event *ev) {
  /* Lifecycle records may have stopped a process: hand them over at once. */
  emit(ev, sizeof(*ev), ev->kind >= GF_EV_LIB_MAPPED);
}

#endif /* GPUFLAME_BPF_LIB_EMIT_BPF_H_ */
