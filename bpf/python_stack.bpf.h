/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython stack walk at a probe hit, driven entirely by the per-process
 * layout in struct gf_py_proc (no version #ifs here).
 *
 * The thread state comes from the glibc pthread TSS slot keyed by CPython's
 * autoTSSkey, never from the GIL holder: PyTorch (and ctypes) release the GIL
 * before calling into CUDA, so at cudaMalloc the calling thread does not hold
 * it (cpython-unwinding.md §1.2).
 */
#ifndef GPUFLAME_BPF_PYTHON_STACK_BPF_H_
#define GPUFLAME_BPF_PYTHON_STACK_BPF_H_

#define GF_PY_OWNED_BY_CSTACK 3
#define GF_TPFLAGS_TYPE_SUBCLASS (1UL << 31)
#define GF_TP_FLAGS_OFF 168 /* PyTypeObject.tp_flags, 3.10-3.13 */

struct gf_walk_ctx {
  struct gf_py_frame *frames; /* GF_MAX_PY_FRAMES slots */
  const struct gf_py_proc *cfg;
  __u64 frame;
  __u32 n;
  __u32 flags;
};

static __always_inline __u64 gf_read_u64(__u64 addr, __u32 *flags) {
  __u64 v = 0;
  if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr) != 0)
    *flags |= GF_EVF_PY_READ_FAILED;
  return v;
}

static __always_inline void gf_push_trampoline(struct gf_walk_ctx *w) {
  __u32 n = w->n;
  if (n >= GF_MAX_PY_FRAMES) {
    w->flags |= GF_EVF_PY_TRUNCATED;
    return;
  }
  struct gf_py_frame *f = &w->frames[n];
  f->code = 0;
  f->aux = 0;
  f->instr = 0;
  f->first_line = 0;
  f->flags = GF_PYF_TRAMPOLINE;
  f->pad = 0;
  w->n = n + 1;
}

static long gf_walk_one(__u32 index, void *arg) {
  struct gf_walk_ctx *w = arg;
  const struct gf_py_proc *cfg = w->cfg;
  __u64 frame = w->frame;
  if (frame == 0)
    return 1;
  if (w->n >= GF_MAX_PY_FRAMES) {
    w->flags |= GF_EVF_PY_TRUNCATED;
    return 1;
  }

  __u64 code = gf_read_u64(frame + cfg->frame_code, &w->flags);
  __u8 owner = 0;
  if (cfg->frame_owner)
    bpf_probe_read_user(&owner, 1, (const void *)(frame + cfg->frame_owner));

  if (cfg->frame_owner && owner == GF_PY_OWNED_BY_CSTACK) {
    /* 3.12/3.13 entry shim pushed by each C _PyEval_EvalFrameDefault. */
    gf_push_trampoline(w);
  } else {
    __u32 n = w->n;
    if (n >= GF_MAX_PY_FRAMES)
      return 1;
    struct gf_py_frame *f = &w->frames[n];
    f->code = code;
    f->flags = 0;
    f->pad = 0;
    f->aux = 0;
    if (cfg->instr_is_pointer) {
      __u64 ip = gf_read_u64(frame + cfg->frame_instr, &w->flags);
      __u64 start = code + cfg->code_adaptive;
      f->instr = ip >= start ? (__u32)((ip - start) / 2) : 0;
    } else {
      __s32 lasti = 0;
      bpf_probe_read_user(&lasti, sizeof(lasti), (const void *)(frame + cfg->frame_instr));
      f->instr = lasti > 0 ? (__u32)lasti : 0;
    }
    __s32 first_line = 0;
    bpf_probe_read_user(&first_line, sizeof(first_line),
                        (const void *)(code + cfg->code_firstlineno));
    f->first_line = (__u16)first_line;
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
    w->n = n + 1;
    if (cfg->frame_is_entry) {
      /* 3.11 marks the first frame of a C activation instead of a shim. */
      __u8 is_entry = 0;
      bpf_probe_read_user(&is_entry, 1, (const void *)(frame + cfg->frame_is_entry));
      if (is_entry)
        gf_push_trampoline(w);
    }
  }
  w->frame = gf_read_u64(frame + cfg->frame_back, &w->flags);
  return 0;
}

/* Finds the calling thread's PyThreadState through the pthread TSS slot. */
static __always_inline __u64 gf_thread_state(const struct gf_py_proc *cfg, __u32 *flags) {
  __s32 hdr[2] = {0, 0}; /* Py_tss_t { int _is_initialized; pthread_key_t _key; } */
  if (bpf_probe_read_user(hdr, sizeof(hdr), (const void *)(cfg->runtime_addr + cfg->tss_off)) ||
      hdr[0] != 1) {
    *flags |= GF_EVF_PY_KEY_UNSET;
    return 0;
  }
  __u32 key = (__u32)hdr[1];
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

/* Walks the Python stack into |frames|; returns the frame count. */
static __always_inline __u32 gf_walk_python(const struct gf_py_proc *cfg,
                                            struct gf_py_frame *frames, __u32 *flags) {
  __u64 tstate = gf_thread_state(cfg, flags);
  if (!tstate)
    return 0;
  __u64 top = gf_read_u64(tstate + cfg->tstate_frame, flags);
  if (cfg->uses_cframe && top)
    top = gf_read_u64(top + cfg->cframe_current, flags);
  struct gf_walk_ctx w = {.frames = frames, .cfg = cfg, .frame = top, .n = 0, .flags = 0};
  bpf_loop(GF_MAX_PY_FRAMES + 1, gf_walk_one, &w, 0);
  *flags |= w.flags;
  return w.n;
}

#endif /* GPUFLAME_BPF_PYTHON_STACK_BPF_H_ */
