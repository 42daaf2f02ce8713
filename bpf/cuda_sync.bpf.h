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
 *
 * In a process that has issued NCCL collectives or sends/receives
 * (lib/nccl_procs.bpf.h), the entry is sent too, at once, with the stack
 * (GF_EV_CUDA_SYNC_ENTER): on a GPU a collective returns as soon as it is
 * enqueued, so a peer that never joins shows only as this wait never
 * returning, and user space must know of it while it waits
 * (profiler/collectives/, a GPU-side hang). Why a record at entry, not a
 * scan of sync_calls from user space once a second, which would cost the
 * call nothing: the map holds no stack, and the hang's report is worth
 * little without the Python stack that waits; taking it later from user
 * space means reading the target's memory while it runs. The entry record
 * costs one more stack walk and record per synchronise call, and only in
 * NCCL processes, which synchronise a few times a step; every other
 * process pays one more hash lookup.
 */
#ifndef GPUFLAME_BPF_CUDA_SYNC_BPF_H_
#define GPUFLAME_BPF_CUDA_SYNC_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gpuflame_abi.h"
#include "lib/emit.bpf.h"
#include "lib/nccl_procs.bpf.h"
#include "lib/stacks.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

/* A synchronise call in flight on one thread. */
struct gf_sync_call {
  __u64 start_ns; /* CLOCK_MONOTONIC at entry */
  __u64 object;   /* the stream or event waited for; 0: device or context */
  __u32 api;
  __u16 depth;
  __u16 entry_sent; /* GF_EV_CUDA_SYNC_ENTER went out: its return must too */
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
  if (is_nccl_process(id >> 32)) {
    /* Marked before the record goes: a return whose entry record was lost
     * to a full ring is still sent, and user space ignores it. */
    struct gf_sync_call *in = bpf_map_lookup_elem(&sync_calls, &id);
    if (in)
      in->entry_sent = 1;
    bump(GF_STAT_CUDA_SYNC_ENTRIES);
    submit_stack_kind(ctx, GF_EV_CUDA_SYNC_ENTER, GF_DOMAIN_SYNC, (__u16)api, 0, call.object, 0, 0, 0, 0);
  }
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
  const bool wanted_return = sync_returns_all || call->entry_sent;
  bpf_map_delete_elem(&sync_calls, &id);
  if (!wanted_return)
    return 0; /* nobody takes it (the agent): only NCCL processes' close a wait */
  bump(GF_STAT_CUDA_SYNCS);
  submit_stack_kind(ctx, GF_EV_CUDA_SYNC, GF_DOMAIN_SYNC, api, 0, object, 0, start,
                    (__u32)PT_REGS_RC(ctx), 0);
  return 0;
}

#endif /* GPUFLAME_BPF_CUDA_SYNC_BPF_H_ */
