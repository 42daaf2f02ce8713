/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA allocation APIs: uprobes on the runtime (libcudart: cudaMalloc,
 * cudaFree, ...) and the driver (libcuda: cuMemAlloc_v2, cuMemCreate,
 * cuMemMap, ...). The API is the attach cookie (enum gf_api), so one program
 * serves every function of the same shape. Entry stores the call, return
 * emits it: the pointer exists only once the call has succeeded.
 */
#ifndef GPUFLAME_BPF_CUDA_ALLOC_BPF_H_
#define GPUFLAME_BPF_CUDA_ALLOC_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gpuflame_abi.h"
#include "lib/alloc_records.bpf.h"
#include "lib/config.bpf.h"
#include "lib/emit.bpf.h"
#include "lib/stacks.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

/* An allocation call in flight on one thread, between entry and return. */
struct gf_call {
  __u64 out;   /* where the API writes the pointer/handle */
  __u64 size;  /* bytes, or the pitch out-pointer for cuMemAllocPitch */
  __u64 aux;   /* height for cuMemAllocPitch, pointer for frees */
  __u32 api;
  __u16 forwarded; /* runtime call: a driver event inside it was emitted */
  __u16 depth;     /* driver call: nested driver calls in flight (their own
                    * exported entry points, called from inside the driver) */
  __u32 stack_at_entry; /* a GF_EV_CALL_STACK went out at entry: decided once,
                         * so shedding switched on mid-call cannot make the
                         * return claim a stack that was never sent */
  __u32 pad;
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
  call.stack_at_entry = outermost && want_user_stack(1);
  if (GF_API_IS_RUNTIME(api))
    bpf_map_update_elem(&runtime_calls, &id, &call, BPF_ANY);
  else
    bpf_map_update_elem(&driver_calls, &id, &call, BPF_ANY);
  if (call.stack_at_entry)
    submit_with_user_stack(ctx, GF_EV_CALL_STACK, GF_DOMAIN_GPU, api, 0, 0, 0, 0, 0, 0);
  return 0;
}

/* An allocation call that returned out of memory, once per call the
 * application made. Its stack is the one sent at the call's entry when there
 * was one (the allocation's would have been), else taken here. A subprogram
 * on the failure branch only: a successful call costs what it did. */
static __noinline void submit_alloc_failed(struct pt_regs *ctx, __u32 api, __u64 size, __u32 stack_at_entry,
                                           __u32 error) {
  if (stack_at_entry) {
    struct gf_event ev;
    fill_header(&ev, GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, (__u16)api, 0, size);
    ev.flags = GF_EVF_STACK_AT_ENTRY;
    ev.arg0 = error;
    emit(&ev, sizeof(ev), true);
    return;
  }
  submit_stack_kind(ctx, GF_EV_ALLOC_FAILED, GF_DOMAIN_GPU, (__u16)api, 0, 0, size, error, 0, 0);
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
    /* Out of memory: said by the call the application made (a driver call
     * inside a runtime call leaves it to the runtime call's return). The
     * pitch of a failed cuMemAllocPitch was never written: size unknown. */
    if (ret == GF_CUDA_OUT_OF_MEMORY && (runtime || !bpf_map_lookup_elem(&runtime_calls, &id)))
      submit_alloc_failed(ctx, api, api == GF_API_CU_MEM_ALLOC_PITCH ? 0 : call->size, call->stack_at_entry,
                          (__u32)ret);
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
  __u32 stack_at_entry = call->stack_at_entry;
  if (!runtime) {
    struct gf_call *outer = bpf_map_lookup_elem(&runtime_calls, &id);
    if (outer) {
      stack_at_entry = outer->stack_at_entry;
      outer->forwarded = 1;
      leaf = outer->api;
      flags |= GF_EVF_FORWARDED;
      bump(GF_STAT_FORWARDED);
    }
  }
  if (stack_at_entry)
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

/* cuMemMap(ptr, size, offset, handle, flags) / cuMemUnmap(ptr, size). An
 * unmap is said at entry (the range goes either way). A map is said at its
 * return, once it succeeded: a failed map backs nothing, and one that ran out
 * of memory is said as an allocation's failure is. A map inside another
 * driver call on the thread has no slot of its own: it is said at entry, as
 * all were before. The return probe costs one more trap per map, which comes
 * once per chunk of an expandable segment (2 or 20 MiB), not per tensor. */
SEC("uprobe")
int map_enter(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  if (api == GF_API_CU_MEM_MAP && !enter_nested_driver_call(id)) {
    struct gf_call call = {
        .out = PT_REGS_PARM1(ctx),
        .size = PT_REGS_PARM2(ctx),
        .aux = PT_REGS_PARM4(ctx),
        .api = api,
    };
    bpf_map_update_elem(&driver_calls, &id, &call, BPF_ANY);
    return 0;
  }
  struct gf_event ev;
  fill_header(&ev, api == GF_API_CU_MEM_MAP ? GF_EV_MAP : GF_EV_UNMAP, GF_DOMAIN_GPU, api,
              PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx));
  if (api == GF_API_CU_MEM_MAP)
    ev.arg0 = PT_REGS_PARM4(ctx);
  submit_small(&ev);
  return 0;
}

SEC("uretprobe")
int map_exit(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  struct gf_call *call = bpf_map_lookup_elem(&driver_calls, &id);
  if (!call) {
    if (wanted(id >> 32))
      bump(GF_STAT_CTX_MISSING);
    return 0;
  }
  if (leave_nested_driver_call(call))
    return 0;
  int ret = (int)PT_REGS_RC(ctx);
  if (ret == 0) {
    struct gf_event ev;
    fill_header(&ev, GF_EV_MAP, GF_DOMAIN_GPU, GF_API_CU_MEM_MAP, call->out, call->size);
    ev.arg0 = call->aux;
    submit_small(&ev);
  } else {
    bump(GF_STAT_FAILED_CALLS);
    if (ret == GF_CUDA_OUT_OF_MEMORY && !bpf_map_lookup_elem(&runtime_calls, &id))
      submit_alloc_failed(ctx, GF_API_CU_MEM_MAP, call->size, 0, (__u32)ret);
  }
  bpf_map_delete_elem(&driver_calls, &id);
  return 0;
}

#endif /* GPUFLAME_BPF_CUDA_ALLOC_BPF_H_ */
