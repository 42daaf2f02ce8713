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

/*
 * A record the ring had no room for, charged to its process (struct
 * gf_loss), and an allocation or free kept itself (struct gf_lost_key):
 * user space shows both under a [lost] frame. Runs only when the ring is
 * full, so its map updates cost nothing in the common case.
 */
static __noinline void note_loss(const struct gf_event *ev) {
  /* A probe-sampled tensor allocation stands for GF_PROBE_TENSOR_SAMPLE_BYTES
   * (torch_alloc.bpf.h) and for about that over its size in allocations:
   * kept so, for the estimate to stay unbiased in both ([lost] counts
   * records, not what they stood for). */
  __u64 bytes = ev->size, objects = 1;
  if ((ev->flags & GF_EVF_SAMPLED) && ev->kind == GF_EV_ALLOC && bytes < GF_PROBE_TENSOR_SAMPLE_BYTES) {
    bytes = GF_PROBE_TENSOR_SAMPLE_BYTES;
    if (ev->size) { /* under 2^22, so the draw's 32 bits cover it */
      objects = GF_PROBE_TENSOR_SAMPLE_BYTES / ev->size;
      if (bpf_get_prandom_u32() % ev->size < GF_PROBE_TENSOR_SAMPLE_BYTES % ev->size)
        objects++;
    }
  }
  struct gf_loss_key k = {.pid = ev->pid, .domain = ev->domain, .kind = ev->kind};
  struct gf_loss *l = bpf_map_lookup_elem(&losses, &k);
  if (!l) {
    struct gf_loss zero = {};
    bpf_map_update_elem(&losses, &k, &zero, BPF_NOEXIST);
    l = bpf_map_lookup_elem(&losses, &k);
  }
  if (l) {
    __sync_fetch_and_add(&l->records, 1);
    if (ev->kind == GF_EV_ALLOC) {
      __sync_fetch_and_add(&l->bytes, bytes);
      __sync_fetch_and_add(&l->objects, objects);
    }
  }
  if ((ev->kind != GF_EV_ALLOC && ev->kind != GF_EV_FREE) ||
      (ev->domain != GF_DOMAIN_GPU && ev->domain != GF_DOMAIN_TORCH))
    return;
  struct gf_lost_key lk = {.addr = ev->addr,
                           .ts_ns = ev->ts_ns,
                           .pid = ev->pid,
                           .domain = ev->domain,
                           .kind = ev->kind,
                           .handle = (ev->flags & GF_EVF_HANDLE) ? 1 : 0,
                           .sampled = (ev->flags & GF_EVF_SAMPLED) ? 1 : 0};
  struct gf_lost_event le = {.ts_ns = ev->ts_ns, .size = bytes, .objects = objects};
  bpf_map_update_elem(&lost_events, &lk, &le, BPF_ANY);
}

/* Hands |len| bytes to user space (a gf_event first); a full ring buffer is
 * counted and charged to the record's process (note_loss), never silent. */
static __always_inline bool emit(void *data, __u64 len, bool urgent) {
  if (bpf_ringbuf_output(&events, data, len, wakeup_flags(urgent))) {
    bump(GF_STAT_RINGBUF_FULL);
    note_loss((const struct gf_event *)data);
    return false;
  }
  bump(GF_STAT_EVENTS);
  return true;
}

/* A lifecycle record, through its own ring (maps.bpf.h), but for an exec
 * and Py_FinalizeEx, which keep their place among the process's records in
 * `events`: the new image's, and the interpreter teardown's frees, which
 * must come after the freeze of its live set (bpf/process_lifecycle.bpf.h). */
static __always_inline bool emit_lifecycle(struct gf_event *ev) {
  if (ev->kind == GF_EV_EXEC || ev->kind == GF_EV_PY_FINALIZE)
    return emit(ev, sizeof(*ev), true);
  if (bpf_ringbuf_output(&lifecycle, ev, sizeof(*ev), BPF_RB_FORCE_WAKEUP)) {
    bump(GF_STAT_RINGBUF_FULL);
    note_loss(ev);
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
