/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records that carry the calling thread's stack, in two shapes:
 *  - submit_stack_kind: Python frames, or else the frame-pointer chain
 *    (variable length, struct gf_record);
 *  - submit_with_user_stack: Python frames plus registers and a copy of the
 *    top of the user stack, for DWARF unwinding in user space (fixed layout,
 *    struct gf_record_native; see gpuflame_abi.h).
 * Both are built in a per-CPU scratch map: far beyond the 512-byte BPF stack.
 * Each map has a slot per program that may be running on a CPU at once
 * (GF_SLOTS, lib/python_stack.bpf.h): the one of the record's kind.
 */
#ifndef GPUFLAME_BPF_LIB_STACKS_BPF_H_
#define GPUFLAME_BPF_LIB_STACKS_BPF_H_

#include "vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "backward_callers.bpf.h"
#include "config.bpf.h"
#include "emit.bpf.h"
#include "maps.bpf.h"
#include "python_stack.bpf.h"
#include "stack_ids.bpf.h"
#include "stats.bpf.h"

/* The largest record: header plus either Python frames or native IPs,
 * and room for the frames' ID after them (lib/stack_ids.bpf.h). */
struct gf_record {
  struct gf_event ev;
  union {
    struct gf_py_frame py[GF_MAX_PY_FRAMES];
    __u64 native[GF_MAX_NATIVE_FRAMES];
  };
  struct gf_stack_id id_room;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GF_SLOTS);
  __type(key, __u32);
  __type(value, struct gf_record);
} scratch SEC(".maps");

/* The fixed-layout record that carries a stack copy (see gpuflame_abi.h). */
struct gf_record_native {
  struct gf_event ev;
  struct gf_py_frame py[GF_MAX_PY_FRAMES];
  struct gf_user_regs regs;
  __u8 stack[GF_USER_STACK_BYTES];
  __u8 slack[4096]; /* not sent: lets the verifier bound a page-sized copy at any offset */
};
#define GF_NATIVE_RECORD_BYTES (sizeof(struct gf_record_native) - 4096)

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GF_SLOTS);
  __type(key, __u32);
  __type(value, struct gf_record_native);
} scratch_native SEC(".maps");

/* For a thread with no Python frames of its own in a Python process: if it
 * works for one running backward() call (lib/backward_callers.bpf.h), that
 * caller's stack goes into |frames| instead, flagged GF_EVF_BACKWARD_CALLER;
 * with several running, whose work this is cannot be told: flagged
 * ambiguous, with their count. Returns the frame count. A launch whose
 * origin the injection library already gave (GF_EVF_AUTOGRAD) is left alone. */
static __always_inline __u32 gf_lend_backward_caller(const struct gf_py_proc *py, struct gf_event *ev,
                                                     struct gf_py_frame *frames, __u32 fingerprint, __u32 slot) {
  if (ev->flags & GF_EVF_AUTOGRAD)
    return 0;
  __u64 tstate = 0;
  __u32 running = gf_backward_callers(py, ev->pid, ev->tid, &tstate);
  if (running == 0)
    return 0;
  if (running > 1) {
    ev->flags |= GF_EVF_BACKWARD_CALLER | GF_EVF_AUTOGRAD_AMBIGUOUS;
    ev->backward_calls = (__u16)running;
    return 0;
  }
  __u32 pyflags = 0;
  __u32 n = gf_walk_tstate(py, tstate, frames, &pyflags, fingerprint, slot);
  if (n == 0)
    return 0;
  ev->flags |= GF_EVF_BACKWARD_CALLER | (pyflags & GF_EVF_PY_TRUNCATED);
  bump(GF_STAT_BACKWARD_LENT);
  return n;
}

/* Adds the registers and a copy of the user stack to |r|, whose header and
 * Python frames are filled, and emits it. */
static __always_inline void emit_with_user_stack(struct gf_record_native *r, struct pt_regs *ctx) {
  r->regs.ip = PT_REGS_IP(ctx);
  r->regs.sp = PT_REGS_SP(ctx);
  r->regs.bp = ctx->bp;
  /* The stack may end (a thread's stack top, the main stack's environment)
   * anywhere above sp, and a read that crosses its end fails whole: copy to
   * the end of sp's page (always mapped), then page by page. */
  __u64 sp = r->regs.sp;
  __u32 len = 0;
  for (int i = 0; i < GF_USER_STACK_BYTES / 4096 + 1; i++) {
    __u32 chunk = i == 0 ? 4096 - (__u32)(sp & 4095) : 4096;
    if (len + chunk > GF_USER_STACK_BYTES)
      chunk = GF_USER_STACK_BYTES - len;
    if (chunk == 0 || chunk > 4096)
      break;
    if (bpf_probe_read_user(&r->stack[len & (GF_USER_STACK_BYTES - 1)], chunk, (const void *)(sp + len)))
      break;
    len += chunk;
  }
  r->ev.user_stack_len = len > GF_USER_STACK_BYTES ? GF_USER_STACK_BYTES : len;
  emit(r, GF_NATIVE_RECORD_BYTES, false);
}

/* Emits an allocation with its Python stack, registers and a copy of the
 * user stack, for native unwinding in user space. */
static __always_inline void submit_with_user_stack(struct pt_regs *ctx, __u8 kind, __u8 domain,
                                                   __u16 api, __u32 flags, __u64 addr, __u64 size,
                                                   __u64 arg0, __u64 arg1, __u64 arg2) {
  __u32 slot = gf_slot_of(kind);
  struct gf_record_native *r = bpf_map_lookup_elem(&scratch_native, &slot);
  if (!r)
    return;
  fill_header(&r->ev, kind, domain, api, addr, size);
  r->ev.flags = flags | GF_EVF_USER_STACK;
  r->ev.arg0 = arg0;
  r->ev.arg1 = arg1;
  r->ev.arg2 = arg2;
  __u32 tgid = r->ev.pid;
  struct gf_py_proc *py = bpf_map_lookup_elem(&py_procs, &tgid);
  if (py) {
    __u32 pyflags = 0;
    const __u32 fingerprint = kind == GF_EV_CPU_SAMPLE || kind == GF_EV_KERNEL_LAUNCH;
    bump(GF_STAT_PY_WALKS);
    __u32 n = gf_walk_python_fp(py, r->py, &pyflags, fingerprint, slot);
    r->ev.flags |= pyflags;
    if (pyflags & GF_EVF_PY_TRUNCATED)
      bump(GF_STAT_PY_TRUNCATED);
    if (n == 0)
      n = gf_lend_backward_caller(py, &r->ev, r->py, fingerprint, slot);
    r->ev.py_count = n > GF_MAX_PY_FRAMES ? GF_MAX_PY_FRAMES : n;
  }
  emit_with_user_stack(r, ctx);
}

/* Emits an event (an allocation, a CPU sample, a launch) with the calling
 * thread's stack: Python frames, or the frame-pointer chain without Python. */
static __always_inline void submit_stack_kind(void *ctx, __u8 kind, __u8 domain, __u16 api,
                                              __u32 flags, __u64 addr, __u64 size, __u64 arg0,
                                              __u64 arg1, __u64 arg2) {
  __u32 slot = gf_slot_of(kind);
  struct gf_record *r = bpf_map_lookup_elem(&scratch, &slot);
  if (!r)
    return;
  fill_header(&r->ev, kind, domain, api, addr, size);
  r->ev.flags = flags;
  r->ev.arg0 = arg0;
  r->ev.arg1 = arg1;
  r->ev.arg2 = arg2;

  __u64 len = sizeof(struct gf_event);
  __u32 tgid = r->ev.pid;
  struct gf_py_proc *py = bpf_map_lookup_elem(&py_procs, &tgid);
  __u32 n = 0;
  if (bench_stop(GF_STAGE_HEADER))
    return;
  if (py) {
    __u32 pyflags = 0;
    const __u32 fingerprint = kind == GF_EV_CPU_SAMPLE || kind == GF_EV_KERNEL_LAUNCH;
    bump(GF_STAT_PY_WALKS);
    n = gf_walk_python_fp(py, r->py, &pyflags, fingerprint, slot);
    r->ev.flags |= pyflags;
    if (pyflags & GF_EVF_PY_NO_THREAD)
      bump(GF_STAT_PY_NO_THREAD);
    if (pyflags & GF_EVF_PY_READ_FAILED)
      bump(GF_STAT_PY_READ_FAILED);
    if (pyflags & GF_EVF_PY_TRUNCATED)
      bump(GF_STAT_PY_TRUNCATED);
    if (bench_stop_at && bench_stop_at <= GF_STAGE_WALK)
      return; /* a benchmark's stage past the header: nothing emitted */
    if (n == 0)
      n = gf_lend_backward_caller(py, &r->ev, r->py, fingerprint, slot);
    if (n > GF_MAX_PY_FRAMES)
      n = GF_MAX_PY_FRAMES;
    r->ev.py_count = n;
    len += (__u64)n * sizeof(struct gf_py_frame);
    if (n != 0 && intern_stacks) {
      emit_interned(&r->ev, r->py, n, len, slot);
      return;
    }
    if (n == 0 && kind == GF_EV_ALLOC && want_user_stack(1)) {
      /* A tensor allocation on a thread of a Python process that runs no
       * Python and works for no one backward() call (an engine thread
       * outside backward, or while several run): unwind it as device-level
       * allocations are, from a stack copy. The frame-pointer chain of
       * libraries built without frame pointers (PyTorch's) is garbage after
       * the first frame. Rare: such threads make few allocations. The
       * header as walked (no frames; an ambiguous count) goes with it. */
      struct gf_record_native *nr = bpf_map_lookup_elem(&scratch_native, &slot);
      if (nr) {
        __builtin_memcpy(&nr->ev, &r->ev, sizeof(r->ev));
        nr->ev.flags |= GF_EVF_USER_STACK;
        emit_with_user_stack(nr, (struct pt_regs *)ctx);
        return;
      }
    }
  }
  if (n == 0 && capture_native_fallback) {
    /* No Python stack on this thread (native worker, or not a Python
     * process): keep the frame-pointer chain so the flame graph still says
     * something. */
    long got = bpf_get_stack(ctx, r->native, sizeof(r->native), BPF_F_USER_STACK);
    if (got > 0) {
      __u32 cnt = (__u32)got / 8;
      if (cnt > GF_MAX_NATIVE_FRAMES)
        cnt = GF_MAX_NATIVE_FRAMES;
      r->ev.native_count = cnt;
      len = sizeof(struct gf_event) + (__u64)cnt * 8;
    }
  }
  if (len > sizeof(*r))
    len = sizeof(*r);
  emit(r, len, false);
}

#endif /* GPUFLAME_BPF_LIB_STACKS_BPF_H_ */
