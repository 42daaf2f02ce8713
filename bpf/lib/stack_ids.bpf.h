/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Python stacks interned in the kernel (gpuflame_abi.h, struct
 * gf_stack_id): a stack sent before goes out again as its 16-byte ID, so a
 * record of a training step's allocation is 88 bytes, not ~1 KB.
 */
#ifndef GPUFLAME_BPF_LIB_STACK_IDS_BPF_H_
#define GPUFLAME_BPF_LIB_STACK_IDS_BPF_H_

#include "vmlinux_min.h"

#include <bpf/bpf_helpers.h>

#include "config.bpf.h"
#include "emit.bpf.h"
#include "gpuflame_abi.h"
#include "python_stack.bpf.h"
#include "stack_hash.bpf.h"
#include "stats.bpf.h"

/*
 * The stacks this CPU has sent, per CPU: a 2-way set-associative cache of
 * IDs, GF_SENT_SETS sets indexed by the ID's low bits. Per CPU, so no
 * lock, no atomic and no line shared with another CPU is needed. The one
 * program that can run inside another on a CPU, the sampler inside a probe,
 * at worst sends frames again: an ID is marked only after its frames are in
 * the ring, and a half-written way matches no other full ID. And an ID
 * this CPU has sent is behind its frames in the ring whatever CPU the
 * frames' record came from, since a CPU's records enter the ring in its
 * order. The first event of a stack on each CPU sends the frames (user space
 * keeps one copy); an ID pushed out of its set only means its frames are
 * sent again. Against sending every stack whole, in the same run on the
 * H200 (launch-bound GPT steps, bench modes gpuflame against
 * gpuflame-nointern), this cache saved 105 ns of BPF time per hit where a
 * shared LRU hash of sent IDs had cost 27 more.
 */
#define GF_SENT_SETS 2048
struct gf_sent_way {
  __u64 lo;
  __u64 hi;
  __u32 pid;
  __u32 pad;
};
struct gf_sent_set {
  struct gf_sent_way way[2]; /* way[0] the most recently sent */
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GF_SENT_SETS);
  __type(key, __u32);
  __type(value, struct gf_sent_set);
} sent_stacks SEC(".maps");

static __always_inline bool gf_sent_is(const struct gf_sent_way *w, const struct gf_stack_id *id, __u32 pid) {
  return w->lo == id->lo && w->hi == id->hi && w->pid == pid;
}

/*
 * The record (header |ev| filled, |n| > 0 Python frames after it at
 * |frames|, |len| bytes in all; the walker's hash of them in frame_buf's
 * |slot|) goes out as an ID if this CPU sent its stack, else with its frames
 * and their ID. The record has room for 16 bytes past its largest length.
 */
static __always_inline void emit_interned(struct gf_event *ev, struct gf_py_frame *frames, __u32 n, __u64 len,
                                          __u32 slot) {
  struct gf_frame_buf *buf = bpf_map_lookup_elem(&frame_buf, &slot);
  if (!buf || buf->n != n) {
    emit(ev, len, false); /* no hash of these frames: sent whole, unnamed */
    return;
  }
  struct gf_stack_id id;
  gf_stack_hash_end(&buf->hash, n, &id);
  __u32 index = (__u32)id.lo & (GF_SENT_SETS - 1);
  struct gf_sent_set *set = bpf_map_lookup_elem(&sent_stacks, &index);
  if (bench_stop(GF_STAGE_INTERN) || !set)
    return;
  if (gf_sent_is(&set->way[0], &id, ev->pid) || gf_sent_is(&set->way[1], &id, ev->pid)) {
    ev->flags |= GF_EVF_STACK_ID;
    /* The frames are no longer needed: the ID goes where they began. */
    __builtin_memcpy(frames, &id, sizeof(id));
    if (emit(ev, sizeof(*ev) + sizeof(id), false))
      bump(GF_STAT_STACK_IDS);
    return;
  }
  ev->flags |= GF_EVF_STACK_NEW;
  __u32 at = n * sizeof(struct gf_py_frame);
  asm volatile("" : "+r"(at));
  if (at > GF_MAX_PY_FRAMES * sizeof(struct gf_py_frame))
    return;
  __builtin_memcpy((__u8 *)frames + at, &id, sizeof(id));
  if (!emit(ev, len + sizeof(id), false))
    return; /* not in the ring: it is not sent */
  bump(GF_STAT_STACK_NEW);
  set->way[1] = set->way[0];
  set->way[0].lo = id.lo;
  set->way[0].hi = id.hi;
  set->way[0].pid = ev->pid;
}

#endif /* GPUFLAME_BPF_LIB_STACK_IDS_BPF_H_ */
