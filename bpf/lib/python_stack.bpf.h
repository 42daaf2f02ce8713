/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython stack walk at a probe hit, driven entirely by the per-process
 * layout in struct gf_py_proc (no version #ifs here).
 *
 * The thread state comes from the glibc pthread TSS slot keyed by CPython's
 * autoTSSkey, never from the GIL holder: PyTorch (and ctypes) release the GIL
 * before calling into CUDA, so at cudaMalloc the calling thread does not hold
 * it. The slot is glibc's: *(fsbase + 0x310 + 16 * key + 8) for key < 32
 * (struct pthread's specific_1stblock at 784, glibc 2.27-2.38).
 */
#ifndef GPUFLAME_BPF_LIB_PYTHON_STACK_BPF_H_
#define GPUFLAME_BPF_LIB_PYTHON_STACK_BPF_H_

#include "vmlinux_min.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "config.bpf.h"
#include "gpuflame_abi.h"
#include "stack_hash.bpf.h"

#define GF_PY_OWNED_BY_CSTACK 3
#define GF_TPFLAGS_TYPE_SUBCLASS (1UL << 31)
#define GF_TP_FLAGS_OFF 168 /* PyTypeObject.tp_flags, 3.10-3.13 */

/*
 * User-memory reads dominate the walk (~100 ns each in a VM, whatever their
 * size), so the walker copies in bulk:
 *  - 3.11+: the top GF_WINDOW bytes of the thread's datastack chunk, where
 *    CPython pushes _PyInterpreterFrames contiguously, in one read into
 *    bytes[0, GF_WINDOW);
 *  - any frame outside it (generator frames live in their generator, older
 *    chunks, 3.10's heap frames): one read of its leading bytes into
 *    bytes[GF_WINDOW, GF_WINDOW + 128).
 */
#define GF_WINDOW 8192
struct gf_frame_buf {
  /* Walk state lives here, not on the BPF stack: map values are opaque to
   * the verifier, so the loop body converges instead of being explored once
   * per frame count. */
  __u64 frame;
  __u64 win_start; /* user address copied to bytes[0]; equal to win_end: no window */
  __u64 win_end;
  __u32 n;
  __u32 flags;
  __u32 fingerprint; /* also read each code object's co_firstlineno */
  __u32 pad;
  struct gf_stack_hash hash; /* of the frames written so far (lib/stack_hash.bpf.h) */
  __u8 bytes[2 * GF_WINDOW + 136]; /* slack: the verifier bounds base and offset separately */
};

/*
 * Per-CPU scratch (frame_buf here, the records of stacks.bpf.h) has one slot
 * per kind of program that can be running on a CPU at the same time. The
 * CPU sampler, a perf_event program run from the timer interrupt, can fire
 * in the middle of a probe's program on the same CPU (the kernel runs it
 * inside a uprobe program; seen on 6.18). With one slot, a tick that landed
 * in cudaMalloc's entry probe rewrote the record that probe was building:
 * its stack at entry went out as a second copy of the sample, and the
 * allocation was left with a stack of its API alone. The sampler never
 * interrupts itself, so two slots: the probes', the sampler's.
 */
#define GF_SLOT_PROBE 0
#define GF_SLOT_SAMPLER 1
#define GF_SLOTS 2

static __always_inline __u32 gf_slot_of(__u8 kind) {
  return kind == GF_EV_CPU_SAMPLE ? GF_SLOT_SAMPLER : GF_SLOT_PROBE;
}

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GF_SLOTS);
  __type(key, __u32);
  __type(value, struct gf_frame_buf);
} frame_buf SEC(".maps");

/* A field of a frame copied at |base|; offsets come from user space and are
 * masked so the verifier can bound every access. */
static __always_inline __u64 gf_field_u64(const struct gf_frame_buf *b, __u32 base, __u16 off) {
  return *(const __u64 *)&b->bytes[(base & GF_WINDOW) + (base & (GF_WINDOW - 1)) + (off & 0x7f)];
}
static __always_inline __u8 gf_field_u8(const struct gf_frame_buf *b, __u32 base, __u16 off) {
  return b->bytes[(base & GF_WINDOW) + (base & (GF_WINDOW - 1)) + (off & 0x7f)];
}

struct gf_walk_ctx {
  struct gf_frame_buf *buf;
  struct gf_py_frame *frames; /* GF_MAX_PY_FRAMES slots */
  const struct gf_py_proc *cfg;
};

static __always_inline __u64 gf_read_u64(__u64 addr, __u32 *flags) {
  __u64 v = 0;
  if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr) != 0)
    *flags |= GF_EVF_PY_READ_FAILED;
  return v;
}

static __always_inline void gf_push_trampoline(struct gf_walk_ctx *w) {
  __u32 n = w->buf->n;
  /* Keep clang from reusing an earlier bound the verifier cannot see. */
  asm volatile("" : "+r"(n));
  if (n >= GF_MAX_PY_FRAMES) {
    w->buf->flags |= GF_EVF_PY_TRUNCATED;
    return;
  }
  /* The mask restates the bound for the verifier (GF_MAX_PY_FRAMES is a power of two). */
  struct gf_py_frame *f = &w->frames[n & (GF_MAX_PY_FRAMES - 1)];
  f->code = 0;
  f->aux = 0;
  f->instr = 0;
  f->first_line = 0;
  f->flags = GF_PYF_TRAMPOLINE;
  f->pad = 0;
  gf_stack_hash_frame(&w->buf->hash, f);
  w->buf->n = n + 1;
}

static long gf_walk_one(__u32 index, void *arg) {
  struct gf_walk_ctx *w = arg;
  const struct gf_py_proc *cfg = w->cfg;
  struct gf_frame_buf *buf = w->buf;
  __u64 frame = w->buf->frame;
  if (frame == 0)
    return 1;
  if (w->buf->n >= GF_MAX_PY_FRAMES) {
    w->buf->flags |= GF_EVF_PY_TRUNCATED;
    return 1;
  }
  __u32 len = cfg->frame_read_len & 0x7f;
  if (len < 8)
    len = 8;
  __u32 base;
  if (frame >= w->buf->win_start && frame + len <= w->buf->win_end) {
    base = (__u32)(frame - w->buf->win_start) & (GF_WINDOW - 1);
  } else {
    base = GF_WINDOW;
    if (bpf_probe_read_user(&buf->bytes[GF_WINDOW], len, (const void *)frame)) {
      w->buf->flags |= GF_EVF_PY_READ_FAILED;
      return 1;
    }
  }
  __u64 code = gf_field_u64(buf, base, cfg->frame_code);
  __u64 back = gf_field_u64(buf, base, cfg->frame_back);

  if (cfg->frame_owner && gf_field_u8(buf, base, cfg->frame_owner) == GF_PY_OWNED_BY_CSTACK) {
    /* 3.12/3.13 entry shim pushed by each C _PyEval_EvalFrameDefault. */
    gf_push_trampoline(w);
  } else {
    __u32 n = w->buf->n;
    if (n >= GF_MAX_PY_FRAMES)
      return 1;
    struct gf_py_frame *f = &w->frames[n & (GF_MAX_PY_FRAMES - 1)];
    f->code = code;
    f->flags = 0;
    f->pad = 0;
    f->aux = 0;
    if (cfg->instr_is_pointer) {
      __u64 ip = gf_field_u64(buf, base, cfg->frame_instr);
      __u64 start = code + cfg->code_adaptive;
      f->instr = ip >= start ? (__u32)((ip - start) / 2) : 0;
    } else {
      __s32 lasti = (__s32)gf_field_u64(buf, base, cfg->frame_instr);
      f->instr = lasti > 0 ? (__u32)lasti : 0;
    }
    f->first_line = 0;
    if (buf->fingerprint && code) {
      /* Samples are resolved after the fact, when a short-lived code object
       * (an imported module's body) may be freed and its address reused:
       * co_firstlineno taken now lets user space tell. One read per frame,
       * so only for CPU samples and launches, not the allocation hot path. */
      __s32 first = 0;
      if (!bpf_probe_read_user(&first, sizeof(first), (const void *)(code + cfg->code_firstlineno))) {
        f->first_line = (__u16)first;
        f->flags |= GF_PYF_FIRST_LINE;
      }
    }
    if (cfg->read_self_type) {
      /* 3.10 has no co_qualname: keep the class of `self`/`cls` for naming.
       * User space uses it only when the first parameter is self or cls. */
      __u64 obj = 0, type = 0, tp_flags = 0;
      bpf_probe_read_user(&obj, sizeof(obj), (const void *)(frame + cfg->frame_localsplus));
      if (obj) {
        bpf_probe_read_user(&type, sizeof(type), (const void *)(obj + 8));
        if (type)
          bpf_probe_read_user(&tp_flags, sizeof(tp_flags),
                              (const void *)(type + GF_TP_FLAGS_OFF));
        f->aux = (tp_flags & GF_TPFLAGS_TYPE_SUBCLASS) ? obj : type;
      }
    }
    gf_stack_hash_frame(&buf->hash, f);
    w->buf->n = n + 1;
    /* 3.11 marks the first frame of a C activation instead of a shim. */
    if (cfg->frame_is_entry && gf_field_u8(buf, base, cfg->frame_is_entry))
      gf_push_trampoline(w);
  }
  w->buf->frame = back;
  return 0;
}

/* Finds the calling thread's PyThreadState through the pthread TSS slot. */
static __always_inline __u64 gf_thread_state(struct gf_py_proc *cfg, __u32 *flags) {
  __u32 key = cfg->tss_key_plus1 - 1;
  if (cfg->tss_key_plus1 == 0) {
    __s32 hdr[2] = {0, 0}; /* Py_tss_t { int _is_initialized; pthread_key_t _key; } */
    if (bpf_probe_read_user(hdr, sizeof(hdr), (const void *)(cfg->runtime_addr + cfg->tss_off)) ||
        hdr[0] != 1) {
      *flags |= GF_EVF_PY_KEY_UNSET;
      return 0;
    }
    key = (__u32)hdr[1];
    cfg->tss_key_plus1 = key + 1;
  }
  struct task_struct *task = bpf_get_current_task_btf();
  __u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
  __u64 tstate = 0;
  if (key < 32) {
    tstate = gf_read_u64(fsbase + cfg->pthread_specific_off + key * 16 + 8, flags);
  } else if (key < 1024) {
    /* glibc second level: struct pthread_key_data *specific[32] follows the
     * 32-entry first block. */
    __u64 block = gf_read_u64(fsbase + cfg->pthread_specific_off + 32 * 16 + (key / 32) * 8, flags);
    if (block)
      tstate = gf_read_u64(block + (key % 32) * 16 + 8, flags);
  }
  if (!tstate)
    *flags |= GF_EVF_PY_NO_THREAD;
  return tstate;
}

/* The thread's innermost Python frame (0: none), alone. */
static __always_inline __u64 gf_top_frame(const struct gf_py_proc *cfg, __u64 tstate, __u32 *flags) {
  __u64 top = gf_read_u64(tstate + cfg->tstate_frame, flags);
  if (cfg->uses_cframe && top)
    top = gf_read_u64(top + cfg->cframe_current, flags);
  return top;
}

/* The largest span of PyThreadState read at once: its frame field and its
 * data-stack fields lie within 256 bytes of each other in 3.11-3.13. */
#define GF_TSTATE_SPAN 512

/*
 * The thread's innermost Python frame (0: none), as the walk starts from
 * it, and (3.11+) the live part of its data stack [*ds_data, *ds_top) (equal
 * when unknown). 3.11+ reads the PyThreadState fields from the frame field
 * to datastack_top at once, into |buf|'s spare half: one read where there
 * were two, and reads, not bytes, are what cost.
 */
static __always_inline __u64 gf_thread_frames(const struct gf_py_proc *cfg, __u64 tstate, struct gf_frame_buf *buf,
                                              __u64 *ds_data, __u64 *ds_top, __u32 *flags) {
  *ds_data = *ds_top = 0;
  __u64 top = 0;
  if (cfg->tstate_datastack) {
    __u32 lo = cfg->tstate_frame < cfg->tstate_datastack ? cfg->tstate_frame : cfg->tstate_datastack;
    __u32 hi = cfg->tstate_frame + 8 > cfg->tstate_datastack + 16 ? cfg->tstate_frame + 8
                                                                   : cfg->tstate_datastack + 16;
    __u32 len = hi - lo;
    if (len > GF_TSTATE_SPAN) {
      *flags |= GF_EVF_PY_READ_FAILED;
      return 0;
    }
    asm volatile("" : "+r"(len));
    len &= GF_TSTATE_SPAN * 2 - 1; /* restated for the verifier */
    if (len == 0 || bpf_probe_read_user(&buf->bytes[GF_WINDOW], len, (const void *)(tstate + lo))) {
      *flags |= GF_EVF_PY_READ_FAILED;
      return 0;
    }
    const __u8 *t = &buf->bytes[GF_WINDOW];
    top = *(const __u64 *)&t[(cfg->tstate_frame - lo) & (GF_TSTATE_SPAN - 1)];
    /* datastack_chunk and datastack_top are adjacent in PyThreadState. */
    __u64 chunk = *(const __u64 *)&t[(cfg->tstate_datastack - lo) & (GF_TSTATE_SPAN - 1)];
    __u64 end = *(const __u64 *)&t[(cfg->tstate_datastack - lo + 8) & (GF_TSTATE_SPAN - 1)];
    if (chunk && end > chunk + 24) {
      *ds_data = chunk + 24; /* _PyStackChunk.data */
      *ds_top = end;
    }
  } else {
    top = gf_read_u64(tstate + cfg->tstate_frame, flags);
  }
  if (cfg->uses_cframe && top)
    top = gf_read_u64(top + cfg->cframe_current, flags);
  return top;
}

/* Walks the Python stack of the thread whose PyThreadState is |tstate| (the
 * calling thread's, or one blocked in backward() that the calling thread
 * works for) into |frames|, in frame_buf's |slot|; returns the frame count. */
static __always_inline __u32 gf_walk_tstate(const struct gf_py_proc *cfg, __u64 tstate, struct gf_py_frame *frames,
                                            __u32 *flags, __u32 fingerprint, __u32 slot) {
  struct gf_frame_buf *buf = bpf_map_lookup_elem(&frame_buf, &slot);
  if (!buf)
    return 0;
  __u64 data = 0, end = 0;
  __u64 top = gf_thread_frames(cfg, tstate, buf, &data, &end, flags);
  if (bench_stop(GF_STAGE_THREAD))
    return 0;
  struct gf_walk_ctx w = {.buf = buf, .frames = frames, .cfg = cfg};
  buf->frame = top;
  buf->n = 0;
  buf->flags = 0;
  buf->fingerprint = fingerprint;
  gf_stack_hash_start(&buf->hash, cfg->generation);
  buf->win_start = buf->win_end = 0;
  if (top && end > data) {
    __u64 start = end - data > GF_WINDOW ? end - GF_WINDOW : data;
    __u32 size = (__u32)(end - start);
    if (size > GF_WINDOW)
      size = GF_WINDOW;
    asm volatile("" : "+r"(size));
    size &= 2 * GF_WINDOW - 1; /* an unsigned bound the verifier can see; size <= GF_WINDOW already */
    if (size && !bpf_probe_read_user(buf->bytes, size, (const void *)start)) {
      buf->win_start = start;
      buf->win_end = start + size;
    }
  }
  if (bench_stop(GF_STAGE_WINDOW))
    return 0;
  bpf_loop(GF_MAX_PY_FRAMES + 1, gf_walk_one, &w, 0);
  *flags |= buf->flags;
  return buf->n;
}

/* Walks the calling thread's Python stack into |frames|; returns the frame count. */
static __always_inline __u32 gf_walk_python_fp(struct gf_py_proc *cfg, struct gf_py_frame *frames,
                                               __u32 *flags, __u32 fingerprint, __u32 slot) {
  __u64 tstate = gf_thread_state(cfg, flags);
  if (!tstate || bench_stop(GF_STAGE_TSTATE))
    return 0;
  return gf_walk_tstate(cfg, tstate, frames, flags, fingerprint, slot);
}

#endif /* GPUFLAME_BPF_LIB_PYTHON_STACK_BPF_H_ */
