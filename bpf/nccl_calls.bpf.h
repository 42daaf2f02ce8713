/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL calls: a uprobe and a uretprobe on each API of whatever libnccl a
 * process maps (PyTorch wheels ship their own). The API is the attach
 * cookie (enum gf_api). Entry sends the call with the calling thread's stack
 * at once, not at return: a call that never returns (a hang) is the one
 * user space most needs to know about while it is stuck. Return sends a
 * header-only record that closes it (profiler/collectives/).
 *
 * Arguments by the x86-64 SysV ABI (bpf/gpuflame_abi.h lists each
 * signature): integer/pointer arguments in rdi, rsi, rdx, rcx, r8, r9, the
 * 7th on the stack above the return address (stream of the 7-argument
 * collectives); ncclCommInitRank's ncclUniqueId (128 bytes, by value) is
 * passed in memory at the caller's stack pointer, so at entry it sits at
 * sp + 8 and `rank`, the next integer argument, arrives in rdx.
 */
#ifndef GPUFLAME_BPF_NCCL_CALLS_BPF_H_
#define GPUFLAME_BPF_NCCL_CALLS_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gpuflame_abi.h"
#include "lib/emit.bpf.h"
#include "lib/nccl_procs.bpf.h"
#include "lib/stacks.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

/* An NCCL call in flight on one thread. NCCL's own API functions call
 * others (ncclBcast -> ncclBroadcast): the outermost is what the
 * application asked for, the inner ones only deepen it. */
struct gf_nccl_call {
  __u64 out;   /* init: where the communicator is written */
  __u32 api;
  __u32 depth;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct gf_nccl_call);
} nccl_calls SEC(".maps");

/* The 6th argument (this libbpf has no PT_REGS_PARM6: r9 on x86-64). */
#define GF_NCCL_PARM6(ctx) (((struct pt_regs *)(ctx))->r9)

/* The 7th argument: above the return address at entry. */
static __always_inline __u64 nccl_arg7(struct pt_regs *ctx) {
  __u64 v = 0;
  bpf_probe_read_user(&v, sizeof(v), (const void *)(PT_REGS_SP(ctx) + 8));
  return v;
}

/* GF_NCCL_ID_HASH of the ncclUniqueId passed by value (at sp + 8). */
static __always_inline bool nccl_id_hash(struct pt_regs *ctx, __u64 *lo, __u64 *hi) {
  __u64 words[GF_NCCL_UNIQUE_ID_BYTES / 8];
  if (bpf_probe_read_user(words, sizeof(words), (const void *)(PT_REGS_SP(ctx) + 8)))
    return false;
  __u64 a = GF_NCCL_FNV_BASIS, b = GF_NCCL_FNV_BASIS ^ GF_NCCL_ID_HASH_HI_SEED;
#pragma unroll
  for (int i = 0; i < GF_NCCL_UNIQUE_ID_BYTES / 8; i++) {
    a = (a ^ words[i]) * GF_NCCL_FNV_PRIME;
    b = (b ^ words[i]) * GF_NCCL_FNV_PRIME;
  }
  *lo = a;
  *hi = b;
  return true;
}

SEC("uprobe")
int nccl_enter(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  struct gf_nccl_call *outer = bpf_map_lookup_elem(&nccl_calls, &id);
  if (outer) {
    outer->depth++;
    bump(GF_STAT_NCCL_NESTED);
    return 0;
  }
  __u32 api = (__u32)bpf_get_attach_cookie(ctx);
  struct gf_nccl_call call = {.api = api};
  __u64 comm = 0, count = 0, stream = 0;
  __u64 dtype = GF_NCCL_NO_OP, op = GF_NCCL_NO_OP;
  __s64 peer = GF_NCCL_NO_PEER;
  switch (api) {
    case GF_API_NCCL_ALL_REDUCE:
    case GF_API_NCCL_REDUCE_SCATTER:
      count = PT_REGS_PARM3(ctx);
      dtype = (__u32)PT_REGS_PARM4(ctx);
      op = (__u32)PT_REGS_PARM5(ctx);
      comm = GF_NCCL_PARM6(ctx);
      stream = nccl_arg7(ctx);
      break;
    case GF_API_NCCL_BROADCAST:
      count = PT_REGS_PARM3(ctx);
      dtype = (__u32)PT_REGS_PARM4(ctx);
      peer = (__s32)PT_REGS_PARM5(ctx);
      comm = GF_NCCL_PARM6(ctx);
      stream = nccl_arg7(ctx);
      break;
    case GF_API_NCCL_ALL_GATHER:
      count = PT_REGS_PARM3(ctx);
      dtype = (__u32)PT_REGS_PARM4(ctx);
      comm = PT_REGS_PARM5(ctx);
      stream = GF_NCCL_PARM6(ctx);
      break;
    case GF_API_NCCL_SEND:
    case GF_API_NCCL_RECV:
      count = PT_REGS_PARM2(ctx);
      dtype = (__u32)PT_REGS_PARM3(ctx);
      peer = (__s32)PT_REGS_PARM4(ctx);
      comm = PT_REGS_PARM5(ctx);
      stream = GF_NCCL_PARM6(ctx);
      break;
    case GF_API_NCCL_COMM_INIT_RANK:
    case GF_API_NCCL_COMM_INIT_RANK_CONFIG:
      call.out = PT_REGS_PARM1(ctx);
      count = (__u32)PT_REGS_PARM2(ctx);
      peer = (__s32)PT_REGS_PARM3(ctx);
      if (!nccl_id_hash(ctx, &stream, &comm))
        bump(GF_STAT_NCCL_ID_UNREADABLE);
      break;
    case GF_API_NCCL_COMM_DESTROY:
    case GF_API_NCCL_COMM_ABORT:
      comm = PT_REGS_PARM1(ctx);
      break;
    default: /* group start/end, unique ID: no arguments of interest */
      break;
  }
  /* A collective or send/receive: this process's synchronise calls may
   * now wait on a peer (lib/nccl_procs.bpf.h). */
  if (api >= GF_API_NCCL_ALL_REDUCE && api <= GF_API_NCCL_RECV)
    mark_nccl_process(id >> 32);
  bpf_map_update_elem(&nccl_calls, &id, &call, BPF_ANY);
  bump(GF_STAT_NCCL_CALLS);
  submit_stack_kind(ctx, GF_EV_NCCL_CALL, GF_DOMAIN_NCCL, (__u16)api, 0, comm, count,
                    (dtype & 0xffffffffull) | (op << 32), (__u64)peer, stream);
  return 0;
}

SEC("uretprobe")
int nccl_exit(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  struct gf_nccl_call *call = bpf_map_lookup_elem(&nccl_calls, &id);
  if (!call) {
    if (wanted(id >> 32))
      bump(GF_STAT_CTX_MISSING);
    return 0;
  }
  if (call->depth) {
    call->depth--;
    return 0;
  }
  struct gf_event ev;
  __u32 api = call->api;
  fill_header(&ev, GF_EV_NCCL_DONE, GF_DOMAIN_NCCL, (__u16)api, 0, 0);
  ev.arg0 = (__u32)PT_REGS_RC(ctx);
  if (GF_API_IS_NCCL_INIT(api) && ev.arg0 == 0) {
    __u64 comm = 0;
    if (!bpf_probe_read_user(&comm, sizeof(comm), (const void *)call->out))
      ev.addr = comm;
  }
  bpf_map_delete_elem(&nccl_calls, &id);
  /* Not urgent: the reader polls every 20 ms, which is at once for a hang
   * (seconds), and the process's exit, on the lifecycle ring, is read after
   * this ring. A wakeup per return made it 8 us a call (bench/nccl_call_cost.sh). */
  emit(&ev, sizeof(ev), false);
  return 0;
}

#endif /* GPUFLAME_BPF_NCCL_CALLS_BPF_H_ */
