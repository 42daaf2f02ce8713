/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA synchronise calls: a uprobe and a uretprobe on each of
 * cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize and the
 * driver's cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize (the
 * API is the attach cookie, enum gf_api). They say how long a CPU thread
 * waited for the GPU, and from where, at the cost of two probe hits per
 * call: CUPTI's SYNCHRONIZATION activity, which said the same without the
 * stack, cost a launch-bound step too much (cupti/activity_tuning.h).
 *
 * One record per call, at return, with start and end and the calling
 * thread's stack: a synchronise call returns (unlike an NCCL hang, a wait
 * that never ends is not what these are for), and one record instead of two
 * halves the ring traffic. The stack is taken at return: Python frames are
 * the interpreter's, unchanged by the call; native frames by frame pointers
 * only (no user-stack copy: the uretprobe trampoline has replaced the
 * return address by now).
 *
 * The runtime's calls run the driver's inside: only the outermost is
 * recorded, the inner ones only deepen it (as bpf/nccl_calls.bpf.h does).
 */
#ifndef GPUFLAME_BPF_CUDA_SYNC_BPF_H_
#define GPUFLAME_BPF_CUDA_SYNC_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gpuflame_abi.h"
#include "lib/emit.bpf.h"
#include "lib/stacks.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

/* A synchronise call in flight on one thread. */
struct gf_sync_call {
  __u64 start_ns; /* CLOCK_MONOTONIC at entry */
  __u64 object;   /* the stream or event waited for; 0: device or context */
  __u32 api;
  __u32 depth;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct gf_sync_call);
} sync_calls SEC(".maps");

SEC("uprobe")
int cuda_sync_enter(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  struct gf_sync_call *outer = bpf_map_lookup_elem(&sync_calls, &id);
  if (outer) {
    outer->depth++;
    bump(GF_STAT_CUDA_SYNC_NESTED);
    return 0;
  }
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  struct gf_sync_call call = {.start_ns = bpf_ktime_get_ns(), .api = api};
  /* Device and context calls take no stream (cuCtxSynchronize_v2's context
   * is not a stream either). */
  if (api != GF_API_CUDA_DEVICE_SYNC && api != GF_API_CU_CTX_SYNC)
    call.object = PT_REGS_PARM1(ctx);
  /* No room: the return finds no entry and counts it (GF_STAT_CTX_MISSING). */
  bpf_map_update_elem(&sync_calls, &id, &call, BPF_ANY);
  return 0;
}

SEC("uretprobe")
int cuda_sync_exit(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  struct gf_sync_call *call = bpf_map_lookup_elem(&sync_calls, &id);
  if (!call) {
    if (wanted(id >> 32))
      bump(GF_STAT_CTX_MISSING);
    return 0;
  }
  if (call->depth) {
    call->depth--;
    return 0;
  }
  __u64 start = call->start_ns, object = call->object;
  __u16 api = (__u16)call->api;
  bpf_map_delete_elem(&sync_calls, &id);
  bump(GF_STAT_CUDA_SYNCS);
  submit_stack_kind(ctx, GF_EV_CUDA_SYNC, GF_DOMAIN_SYNC, api, 0, object, 0, start,
                    (__u32)PT_REGS_RC(ctx), 0);
  return 0;
}

#endif /* GPUFLAME_BPF_CUDA_SYNC_BPF_H_ */
