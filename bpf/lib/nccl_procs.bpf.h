/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The processes that have issued an NCCL collective or send/receive
 * (bpf/nccl_calls.bpf.h marks them, at the call's entry, before it can be
 * enqueued). Only their synchronise calls are sent at entry too
 * (bpf/cuda_sync.bpf.h): in them a wait that never returns may be an NCCL
 * peer that never joined, and every other process keeps one record per
 * synchronise call. Forgotten at the process's exit (watch_exit).
 */
#ifndef GPUFLAME_BPF_LIB_NCCL_PROCS_BPF_H_
#define GPUFLAME_BPF_LIB_NCCL_PROCS_BPF_H_

#include "vmlinux_min.h"

#include <bpf/bpf_helpers.h>

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);  /* tgid */
  __type(value, __u8); /* unused */
} nccl_procs SEC(".maps");

/* Marks the current process; a lookup first, so a process's every later
 * call costs a lookup, not an update. No room: its synchronise calls are
 * sent only at return (no GPU-side hang found for it). */
static __always_inline void mark_nccl_process(__u32 tgid) {
  if (bpf_map_lookup_elem(&nccl_procs, &tgid))
    return;
  __u8 one = 1;
  bpf_map_update_elem(&nccl_procs, &tgid, &one, BPF_NOEXIST);
}

static __always_inline bool is_nccl_process(__u32 tgid) {
  return bpf_map_lookup_elem(&nccl_procs, &tgid) != 0;
}

#endif /* GPUFLAME_BPF_LIB_NCCL_PROCS_BPF_H_ */
