/* SPDX-License-Identifier: Apache-2.0 */
/*
 * When the probes sample a process's tensor allocations by bytes
 * (torch_alloc.bpf.h): over budget (the guardrails' GF_SHED_TENSOR_SAMPLED),
 * or by configuration once the process's start-up is over
 * (tensor_sample_after_ns, config.bpf.h: the agent's default).
 *
 * A start-up is counted from the process's first caching-allocator event
 * that gpuflame sees, not from its fork: a wrapper that execs Python after
 * a slow set-up, a server that loads its model on demand, or a process
 * already running when gpuflame attaches still has its first seconds of
 * tensors (model load, KV cache) taken whole. An exec starts it again.
 */
#ifndef GPUFLAME_BPF_LIB_TENSOR_SAMPLING_BPF_H_
#define GPUFLAME_BPF_LIB_TENSOR_SAMPLING_BPF_H_

#include "vmlinux_min.h"

#include <bpf/bpf_helpers.h>

#include "config.bpf.h"

/* tgid -> CLOCK_MONOTONIC ns from which its tensor allocations are sampled.
 * Deleted at exec and exit (process_lifecycle.bpf.h); an LRU map, so that a
 * node with more processes than entries forgets the oldest (which then start
 * over: exact for another start-up, never wrongly sampled). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u64);
} tensor_sample_from SEC(".maps");

/* Whether the probes sample tensor allocations of |tgid| now. The same test
 * for allocations and frees: a free while sampling may be of a block never
 * taken. */
static __always_inline bool tensor_sampling(__u32 tgid) {
  if (shed & GF_SHED_TENSOR_SAMPLED)
    return true;
  if (!tensor_sample_after_ns)
    return false;
  __u64 now = bpf_ktime_get_ns();
  __u64 *from = bpf_map_lookup_elem(&tensor_sample_from, &tgid);
  if (from)
    return now >= *from;
  __u64 until = now + tensor_sample_after_ns;
  bpf_map_update_elem(&tensor_sample_from, &tgid, &until, BPF_NOEXIST);
  return false;
}

/* An exec or the exit of |tgid|: its next image starts a start-up of its own,
 * and a reused pid does not inherit one. */
static __always_inline void tensor_sampling_forget(__u32 tgid) {
  if (tensor_sample_after_ns)
    bpf_map_delete_elem(&tensor_sample_from, &tgid);
}

#endif /* GPUFLAME_BPF_LIB_TENSOR_SAMPLING_BPF_H_ */
