// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * gpuflame's kernel side: probes on CUDA's allocation APIs and PyTorch's
 * caching allocator, each allocation joined with the calling thread's Python
 * stack, plus the process-lifecycle hooks that let user space attach before a
 * new process allocates anything.
 *
 * Hot-path rules: filter first, one per-CPU scratch record, raw addresses
 * only, frees carry no stack, every drop is counted in `stats`.
 */
#include "vmlinux_min.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "gpuflame_abi.h"
#include "python_stack.bpf.h"

#define GF_SIGSTOP 19
#define GF_PROT_EXEC 0x4

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space before load. */
const volatile bool filter_targets = false; /* only processes in `targets` */
const volatile bool capture_native_fallback = true;
/* Wake the reader only past this much unread data (or for urgent records):
 * a wakeup per record costs an irq_work and a cross-CPU interrupt, which
 * dwarfed everything else per allocation. User space polls on a short timer. */
const volatile __u64 wakeup_bytes = 1 << 20;
/* Copy registers and the top of the user stack for DWARF unwinding in user
 * space: 0 never, 1 device-level events (rare: caching-allocator misses),
 * 2 every allocation (costly on the tensor hot path). */
const volatile __u32 native_stacks = 1;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20); /* resized by user space */
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GF_STAT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, __u32); /* enum gf_target_flags */
} targets SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, struct gf_py_proc);
} py_procs SEC(".maps");

/* An allocation call in flight on one thread, between entry and return. */
struct gf_call {
  __u64 out;   /* where the API writes the pointer/handle */
  __u64 size;  /* bytes, or the pitch out-pointer for cuMemAllocPitch */
  __u64 aux;   /* height for cuMemAllocPitch, pointer for frees */
  __u32 api;
  __u16 forwarded; /* runtime call: a driver event inside it was emitted */
  __u16 depth;     /* driver call: nested driver calls in flight (their own
                    * exported entry points, called from inside the driver) */
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct gf_call);
} runtime_calls SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64);
  __type(value, struct gf_call);
} driver_calls SEC(".maps");

/* The largest record: header plus either Python frames or native IPs. */
struct gf_record {
  struct gf_event ev;
  union {
    struct gf_py_frame py[GF_MAX_PY_FRAMES];
    __u64 native[GF_MAX_NATIVE_FRAMES];
  };
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
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
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gf_record_native);
} scratch_native SEC(".maps");

static __always_inline void bump(__u32 stat) {
  __u64 *v = bpf_map_lookup_elem(&stats, &stat);
  if (v)
    *v += 1; /* per-CPU: no atomics needed */
}

static __always_inline bool wanted(__u32 tgid) {
  if (!filter_targets)
    return true;
  __u32 *flags = bpf_map_lookup_elem(&targets, &tgid);
  return flags && (*flags & GF_TARGET_TRACE);
}

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
  ev->pad = 0;
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

static __always_inline void submit_small(struct gf_event *ev) {
  /* Lifecycle records may have stopped a process: hand them over at once. */
  emit(ev, sizeof(*ev), ev->kind >= GF_EV_LIB_MAPPED);
}

/* Emits an allocation with its Python stack, registers and a copy of the
 * user stack, for native unwinding in user space. */
static __always_inline void submit_with_user_stack(struct pt_regs *ctx, __u8 kind, __u8 domain,
                                                   __u16 api, __u32 flags, __u64 addr, __u64 size,
                                                   __u64 arg0, __u64 arg1, __u64 arg2) {
  __u32 zero = 0;
  struct gf_record_native *r = bpf_map_lookup_elem(&scratch_native, &zero);
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
    bump(GF_STAT_PY_WALKS);
    __u32 n = gf_walk_python_fp(py, r->py, &pyflags, kind == GF_EV_CPU_SAMPLE || kind == GF_EV_KERNEL_LAUNCH);
    r->ev.flags |= pyflags;
    if (pyflags & GF_EVF_PY_TRUNCATED)
      bump(GF_STAT_PY_TRUNCATED);
    r->ev.py_count = n > GF_MAX_PY_FRAMES ? GF_MAX_PY_FRAMES : n;
  }
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

/* Emits an event (an allocation, a CPU sample, a launch) with the calling
 * thread's stack: Python frames, or the frame-pointer chain without Python. */
static __always_inline void submit_stack_kind(void *ctx, __u8 kind, __u8 domain, __u16 api,
                                              __u32 flags, __u64 addr, __u64 size, __u64 arg0,
                                              __u64 arg1, __u64 arg2) {
  __u32 zero = 0;
  struct gf_record *r = bpf_map_lookup_elem(&scratch, &zero);
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
  if (py) {
    __u32 pyflags = 0;
    bump(GF_STAT_PY_WALKS);
    n = gf_walk_python_fp(py, r->py, &pyflags, kind == GF_EV_CPU_SAMPLE || kind == GF_EV_KERNEL_LAUNCH);
    r->ev.flags |= pyflags;
    if (pyflags & GF_EVF_PY_NO_THREAD)
      bump(GF_STAT_PY_NO_THREAD);
    if (pyflags & GF_EVF_PY_READ_FAILED)
      bump(GF_STAT_PY_READ_FAILED);
    if (pyflags & GF_EVF_PY_TRUNCATED)
      bump(GF_STAT_PY_TRUNCATED);
    if (n > GF_MAX_PY_FRAMES)
      n = GF_MAX_PY_FRAMES;
    r->ev.py_count = n;
    len += (__u64)n * sizeof(struct gf_py_frame);
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
  if (native_stacks == 2) {
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

/* ---- CUDA allocation calls: entry stores the call, return emits it ---- */

/* A driver API called from inside another driver API on the same thread
 * (cuMemAllocPitch -> cuMemAlloc, cuMemFreeAsync -> cuMemFree): the outer
 * call is what the application asked for; the inner one is not counted. */
static __always_inline bool enter_nested_driver_call(__u64 id) {
  struct gf_call *outer = bpf_map_lookup_elem(&driver_calls, &id);
  if (!outer)
    return false;
  outer->depth++;
  return true;
}

static __always_inline bool leave_nested_driver_call(struct gf_call *call) {
  if (!call->depth)
    return false;
  call->depth--;
  return true;
}

/* cudaMalloc(void **p, size_t n, ...), cuMemAlloc_v2(CUdeviceptr *p, size_t n),
 * cuMemCreate(handle *h, size_t n, ...), cuMemAllocPitch_v2(p, size_t *pitch,
 * width, height, elem): the out-parameter comes first in all of them. */
SEC("uprobe")
int alloc_enter(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  if (!GF_API_IS_RUNTIME(api) && enter_nested_driver_call(id))
    return 0;
  struct gf_call call = {
      .out = PT_REGS_PARM1(ctx),
      .size = PT_REGS_PARM2(ctx),
      .aux = PT_REGS_PARM4(ctx),
      .api = api,
  };
  bool outermost = GF_API_IS_RUNTIME(api) || !bpf_map_lookup_elem(&runtime_calls, &id);
  if (GF_API_IS_RUNTIME(api))
    bpf_map_update_elem(&runtime_calls, &id, &call, BPF_ANY);
  else
    bpf_map_update_elem(&driver_calls, &id, &call, BPF_ANY);
  if (native_stacks && outermost)
    submit_with_user_stack(ctx, GF_EV_CALL_STACK, GF_DOMAIN_GPU, api, 0, 0, 0, 0, 0, 0);
  return 0;
}

SEC("uretprobe")
int alloc_exit(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  bool runtime = GF_API_IS_RUNTIME(api);
  struct gf_call *call = bpf_map_lookup_elem(runtime ? (void *)&runtime_calls
                                                     : (void *)&driver_calls, &id);
  if (!call) {
    if (wanted(id >> 32))
      bump(GF_STAT_CTX_MISSING);
    return 0;
  }
  if (!runtime && leave_nested_driver_call(call))
    return 0;
  int ret = (int)PT_REGS_RC(ctx);
  if (ret != 0) {
    bump(GF_STAT_FAILED_CALLS);
    goto done;
  }
  if (runtime && call->forwarded)
    goto done; /* the driver call inside it was already counted */

  __u64 addr = 0;
  if (bpf_probe_read_user(&addr, sizeof(addr), (const void *)call->out)) {
    bump(GF_STAT_OUT_READ_FAILED);
    goto done;
  }
  __u64 size = call->size;
  if (api == GF_API_CU_MEM_ALLOC_PITCH) {
    __u64 pitch = 0;
    if (bpf_probe_read_user(&pitch, sizeof(pitch), (const void *)call->size)) {
      bump(GF_STAT_OUT_READ_FAILED);
      goto done;
    }
    size = pitch * call->aux;
  }
  __u32 flags = api == GF_API_CU_MEM_CREATE ? GF_EVF_HANDLE : 0;
  __u16 leaf = api;
  if (!runtime) {
    struct gf_call *outer = bpf_map_lookup_elem(&runtime_calls, &id);
    if (outer) {
      outer->forwarded = 1;
      leaf = outer->api;
      flags |= GF_EVF_FORWARDED;
      bump(GF_STAT_FORWARDED);
    }
  }
  if (native_stacks)
    flags |= GF_EVF_STACK_AT_ENTRY;
  submit_with_stack(ctx, GF_DOMAIN_GPU, leaf, flags, addr, size, 0, 0, 0);
done:
  bpf_map_delete_elem(runtime ? (void *)&runtime_calls : (void *)&driver_calls, &id);
  return 0;
}

/* cudaFree(p), cuMemFree_v2(p), cuMemRelease(handle), *FreeAsync(p, stream). */
SEC("uprobe")
int free_enter(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  __u64 ptr = PT_REGS_PARM1(ctx);
  if (GF_API_IS_RUNTIME(api)) {
    struct gf_call call = {.aux = ptr, .api = api};
    bpf_map_update_elem(&runtime_calls, &id, &call, BPF_ANY);
    return 0;
  }
  if (enter_nested_driver_call(id))
    return 0;
  struct gf_call call = {.aux = ptr, .api = api};
  bpf_map_update_elem(&driver_calls, &id, &call, BPF_ANY);
  if (ptr == 0)
    return 0;
  __u32 flags = api == GF_API_CU_MEM_RELEASE ? GF_EVF_HANDLE : 0;
  __u16 leaf = api;
  struct gf_call *outer = bpf_map_lookup_elem(&runtime_calls, &id);
  if (outer) {
    outer->forwarded = 1;
    leaf = outer->api;
    flags |= GF_EVF_FORWARDED;
  }
  submit_free(GF_DOMAIN_GPU, leaf, flags, ptr);
  return 0;
}

SEC("uretprobe")
int free_exit(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  if (!GF_API_IS_RUNTIME(api)) {
    struct gf_call *dcall = bpf_map_lookup_elem(&driver_calls, &id);
    if (dcall && !leave_nested_driver_call(dcall))
      bpf_map_delete_elem(&driver_calls, &id);
    return 0;
  }
  struct gf_call *call = bpf_map_lookup_elem(&runtime_calls, &id);
  if (!call)
    return 0;
  int ret = (int)PT_REGS_RC(ctx);
  if (ret == 0 && !call->forwarded && call->aux != 0)
    submit_free(GF_DOMAIN_GPU, call->api, 0, call->aux);
  bpf_map_delete_elem(&runtime_calls, &id);
  return 0;
}

/* cuMemMap(ptr, size, offset, handle, flags) / cuMemUnmap(ptr, size). */
SEC("uprobe")
int map_enter(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  struct gf_event ev;
  fill_header(&ev, api == GF_API_CU_MEM_MAP ? GF_EV_MAP : GF_EV_UNMAP, GF_DOMAIN_GPU, api,
              PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx));
  if (api == GF_API_CU_MEM_MAP)
    ev.arg0 = PT_REGS_PARM4(ctx);
  submit_small(&ev);
  return 0;
}

/* ---- PyTorch caching allocator ---- */

SEC("usdt")
int BPF_USDT(torch_malloc, __u64 ptr, __s64 device, __u64 size, __u64 stream) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  submit_with_stack(ctx, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, 0, ptr, size, (__u64)device,
                    stream, 0);
  return 0;
}

SEC("usdt")
int BPF_USDT(torch_free, __u64 ptr) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  submit_free(GF_DOMAIN_TORCH, GF_API_TORCH_FREE, 0, ptr);
  return 0;
}

/* c10::reportMemoryUsageToProfiler(void *ptr, int64_t delta, size_t allocated,
 * size_t reserved, c10::Device device): the fallback for builds without USDT
 * notes. Called on every caching-allocator alloc (+size) and free (-size). */
SEC("uprobe")
int torch_report(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  __u64 ptr = PT_REGS_PARM1(ctx);
  __s64 delta = (__s64)PT_REGS_PARM2(ctx);
  __u64 allocated = PT_REGS_PARM3(ctx);
  __u64 reserved = PT_REGS_PARM4(ctx);
  __u64 device = (PT_REGS_PARM5(ctx) >> 8) & 0xff; /* c10::Device{type, index} */
  if (delta > 0) {
    submit_with_stack(ctx, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0, ptr, (__u64)delta, device,
                      allocated, reserved);
  } else if (delta < 0) {
    struct gf_event ev;
    fill_header(&ev, GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, ptr, (__u64)(-delta));
    ev.arg0 = device;
    ev.arg1 = allocated;
    ev.arg2 = reserved;
    submit_small(&ev);
  }
  return 0;
}

/* ---- CPU time ---- */

/* One perf event per CPU (cpu-clock at the sampling rate) lands here in
 * whatever task is running; only profiled processes are kept. */
SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tgid == 0)
    return 0;
  __u32 *flags = bpf_map_lookup_elem(&targets, &tgid);
  if (!flags || !(*flags & (GF_TARGET_TRACE | GF_TARGET_SAMPLE)))
    return 0;
  bump(GF_STAT_CPU_SAMPLES);
  if (native_stacks) {
    /* The user registers as the thread last left user mode: right whether
     * the tick interrupted user code or a system call. */
    struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    submit_with_user_stack(regs, GF_EV_CPU_SAMPLE, GF_DOMAIN_CPU, GF_API_NONE, 0, 0, 0, 0, 0, 0);
  } else {
    submit_stack_kind(ctx, GF_EV_CPU_SAMPLE, GF_DOMAIN_CPU, GF_API_NONE, 0, 0, 0, 0, 0, 0);
  }
  return 0;
}

/* ---- GPU kernel time: USDT probes of libgpuflame_cupti.so ---- */

struct gf_record_gpu {
  struct gf_event ev;
  union {
    struct gf_kernel_record recs[GF_KERNEL_BATCH_MAX];
    char name[GF_KERNEL_NAME_MAX];
  };
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gf_record_gpu);
} scratch_gpu SEC(".maps");

/* gpuflame:launch(correlation, cbid): a sampled launch, on the launching
 * thread: its stack is what the kernel's time is charged to. */
SEC("usdt")
int BPF_USDT(kernel_launch, __u64 correlation, __u64 cbid) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  bump(GF_STAT_LAUNCHES);
  if (native_stacks)
    submit_with_user_stack(ctx, GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, 0, 0, 0,
                           correlation, cbid, 0);
  else
    submit_stack_kind(ctx, GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, 0, 0, 0,
                      correlation, cbid, 0);
  return 0;
}

/* gpuflame:kernel_batch(records, count): completed GPU work, copied whole
 * before the library reuses its buffer. */
SEC("usdt")
int BPF_USDT(kernel_batch, __u64 records, __u64 count) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  __u32 zero = 0;
  struct gf_record_gpu *r = bpf_map_lookup_elem(&scratch_gpu, &zero);
  if (!r)
    return 0;
  if (count > GF_KERNEL_BATCH_MAX)
    count = GF_KERNEL_BATCH_MAX;
  fill_header(&r->ev, GF_EV_KERNEL_BATCH, GF_DOMAIN_NONE, GF_API_NONE, 0, count);
  __u32 bytes = (__u32)count * sizeof(struct gf_kernel_record);
  if (bytes > sizeof(r->recs))
    bytes = sizeof(r->recs);
  if (bytes == 0)
    return 0;
  if (bpf_probe_read_user(r->recs, bytes, (const void *)records)) {
    bump(GF_STAT_KERNEL_BATCH_READ_FAILED);
    return 0;
  }
  __u64 len = sizeof(struct gf_event) + bytes;
  if (len > sizeof(*r))
    len = sizeof(*r);
  if (emit(r, len, false)) {
    __u32 stat = GF_STAT_KERNEL_RECORDS;
    __u64 *v = bpf_map_lookup_elem(&stats, &stat);
    if (v)
      *v += count;
  }
  return 0;
}

/* gpuflame:kernel_name(id, name): each distinct kernel name, once. */
SEC("usdt")
int BPF_USDT(kernel_name, __u64 name_id, __u64 name) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  __u32 zero = 0;
  struct gf_record_gpu *r = bpf_map_lookup_elem(&scratch_gpu, &zero);
  if (!r)
    return 0;
  fill_header(&r->ev, GF_EV_KERNEL_NAME, GF_DOMAIN_NONE, GF_API_NONE, 0, 0);
  r->ev.arg0 = name_id;
  long n = bpf_probe_read_user_str(r->name, sizeof(r->name), (const void *)name);
  if (n <= 0)
    return 0;
  __u64 len = sizeof(struct gf_event) + (__u64)n;
  if (len > sizeof(*r))
    len = sizeof(*r);
  emit(r, len, false);
  return 0;
}

/* gpuflame:status(code): the injection library is active, or stepped aside. */
SEC("usdt")
int BPF_USDT(cupti_status, __u64 code) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_CUPTI_STATUS, GF_DOMAIN_NONE, GF_API_NONE, 0, 0);
  ev.arg0 = code;
  submit_small(&ev);
  return 0;
}

/* ---- process lifecycle: attach before the first allocation ---- */

static __always_inline __u32 target_flags(__u32 tgid) {
  __u32 *flags = bpf_map_lookup_elem(&targets, &tgid);
  return flags ? *flags : 0;
}

/* Stops a gated process so that user space can attach before it runs on. */
static __always_inline __u32 maybe_gate(__u32 tflags) {
  if (!(tflags & GF_TARGET_GATE))
    return 0;
  bpf_send_signal(GF_SIGSTOP);
  bump(GF_STAT_GATED);
  return GF_EVF_GATED;
}

static __always_inline bool has_prefix(const char *name, const char *prefix, int len) {
  for (int i = 0; i < len; i++)
    if (name[i] != prefix[i])
      return false;
  return true;
}

/* The file behind descriptor |fd| of the current task, or NULL. */
static __always_inline struct file *fd_file(int fd) {
  struct task_struct *task = bpf_get_current_task_btf();
  struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
  if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
    return NULL;
  struct file **fds = BPF_CORE_READ(fdt, fd);
  struct file *file = NULL;
  bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
  return file;
}

/*
 * Every executable file mapping (how ld.so maps a library's text) whose file
 * name says CUDA, PyTorch or libpython. The raw sys_exit tracepoint is the
 * hook because this kernel class offers neither kprobes without tracefs nor
 * fentry; the syscall-number test keeps every other syscall to a few
 * instructions. At exit the mapping exists, so a gated process stopped here
 * shows it in /proc/PID/maps.
 */
#define GF_NR_MMAP 9
SEC("tp_btf/sys_exit")
int BPF_PROG(watch_mmap, struct pt_regs *regs, long ret) {
  struct pt_regs r;
  if (bpf_probe_read_kernel(&r, sizeof(r), regs) || r.orig_ax != GF_NR_MMAP)
    return 0;
  if ((ret < 0 && ret > -4096) || !(r.dx & GF_PROT_EXEC))
    return 0;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  __u32 tflags = target_flags(tgid);
  if (filter_targets && !(tflags & GF_TARGET_TRACE))
    return 0;
  struct file *file = fd_file((int)r.r8);
  if (!file)
    return 0;
  char name[16] = {};
  const unsigned char *dname = BPF_CORE_READ(file, f_path.dentry, d_name.name);
  if (bpf_probe_read_kernel_str(name, sizeof(name), dname) <= 0)
    return 0;
  if (!has_prefix(name, "libcuda", 7) && !has_prefix(name, "libc10", 6) &&
      !has_prefix(name, "libpython3", 10) && !has_prefix(name, "libgpuflame_cup", 15))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_LIB_MAPPED, GF_DOMAIN_NONE, 0, (__u64)ret, 0);
  ev.arg0 = BPF_CORE_READ(file, f_inode, i_ino);
  ev.arg1 = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
  ev.flags = maybe_gate(tflags);
  submit_small(&ev);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(watch_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  __u32 tflags = target_flags(tgid);
  if (!(tflags & GF_TARGET_TRACE))
    return 0;
  /* The old image's interpreter layout must not walk the new one's memory,
   * even for the moment until user space hears of the exec. */
  bpf_map_delete_elem(&py_procs, &tgid);
  struct gf_event ev;
  fill_header(&ev, GF_EV_EXEC, GF_DOMAIN_NONE, 0, 0, 0);
  ev.flags = maybe_gate(tflags);
  submit_small(&ev);
  return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(watch_fork, struct task_struct *parent, struct task_struct *child) {
  __u32 ptgid = BPF_CORE_READ(parent, tgid);
  __u32 tflags = target_flags(ptgid);
  if (!(tflags & GF_TARGET_FOLLOW))
    return 0;
  __u32 ctgid = BPF_CORE_READ(child, tgid);
  if (ctgid == ptgid)
    return 0; /* a new thread, not a new process */
  bpf_map_update_elem(&targets, &ctgid, &tflags, BPF_ANY);
  /* A forked child (a DataLoader worker) has its parent's address space:
   * its Python stacks walk with the same layout until it execs. */
  struct gf_py_proc *py = bpf_map_lookup_elem(&py_procs, &ptgid);
  if (py)
    bpf_map_update_elem(&py_procs, &ctgid, py, BPF_ANY);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(watch_exit, struct task_struct *p) {
  __u32 pid = BPF_CORE_READ(p, pid);
  __u32 tgid = BPF_CORE_READ(p, tgid);
  if (pid != tgid)
    return 0;
  if (!bpf_map_lookup_elem(&targets, &tgid))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_EXIT, GF_DOMAIN_NONE, 0, 0, 0);
  submit_small(&ev);
  return 0;
}

/* Py_FinalizeEx: code objects are about to be freed. A gated process waits
 * here until user space has drained the ring buffer and read every name. */
SEC("uprobe")
int py_finalize(struct pt_regs *ctx) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  __u32 tflags = target_flags(tgid);
  if (!bpf_map_lookup_elem(&py_procs, &tgid))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_PY_FINALIZE, GF_DOMAIN_NONE, 0, 0, 0);
  ev.flags = maybe_gate(tflags);
  submit_small(&ev);
  return 0;
}
