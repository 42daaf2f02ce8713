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

/* The last answer on this CPU: a process's events come in runs on the CPU
 * its thread runs on, so the hash lookup above (and, once its start-up is
 * over, the clock) is paid once per run, not per event. |from| 0: sampling
 * already, for good (until an exec or exit, which bump tensor_sample_gen and
 * so retire every CPU's answer). |check| ties the three fields together: a
 * program preempted while writing them (a preemptible kernel) and another on
 * the same CPU writing in between leave a mix that fails it, and the next
 * event asks the hash again. */
struct tensor_sample_cache {
  __u64 key; /* tgid << 32 | tensor_sample_gen */
  __u64 from;
  __u64 check; /* key ^ from ^ GF_TENSOR_CACHE_SALT */
};
#define GF_TENSOR_CACHE_SALT 0x9e3779b97f4a7c15ull

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct tensor_sample_cache);
} tensor_sample_cache SEC(".maps");

/* Bumped at every exec and exit while the start-up rule is on (machine-wide:
 * a few a second on a busy node, each costing every CPU one hash lookup).
 * Read without an acquire (BPF has none before Linux 6.15, and a fetching
 * atomic on every cache miss would pull this line from every CPU's cache):
 * a weakly ordered CPU (arm64) may read the new generation and still the
 * deleted entry, and cache it under the new one. That takes a lookup within
 * nanoseconds of the exec or exit, for the same tgid; its new image makes
 * its first allocator call milliseconds later at the soonest. Likewise the
 * LRU map forgetting a process that CPUs still cache as sampling: another
 * CPU starts its start-up again, exact there. Either way each event is
 * flagged as what it was (GF_EVF_SAMPLED or not), so totals stay unbiased. */
volatile __u32 tensor_sample_gen = 0;

static __always_inline void tensor_cache_put(struct tensor_sample_cache *c, __u64 key, __u64 from) {
  c->key = key;
  c->from = from;
  c->check = key ^ from ^ GF_TENSOR_CACHE_SALT;
}

/* Whether the probes sample tensor allocations of |tgid| now. The same test
 * for allocations and frees: a free while sampling may be of a block never
 * taken. */
static __always_inline bool tensor_sampling(__u32 tgid) {
  if (shed & GF_SHED_TENSOR_SAMPLED)
    return true;
  if (!tensor_sample_after_ns)
    return false;
  __u32 zero = 0;
  struct tensor_sample_cache *c = bpf_map_lookup_elem(&tensor_sample_cache, &zero);
  if (!c)
    return false; /* cannot happen: an array's one entry */
  const __u64 key = (__u64)tgid << 32 | tensor_sample_gen;
  __u64 from = c->from;
  if (c->key != key || c->check != (key ^ from ^ GF_TENSOR_CACHE_SALT)) {
    __u64 *known = bpf_map_lookup_elem(&tensor_sample_from, &tgid);
    if (known) {
      from = *known;
    } else {
      from = bpf_ktime_get_ns() + tensor_sample_after_ns;
      bpf_map_update_elem(&tensor_sample_from, &tgid, &from, BPF_NOEXIST);
    }
  } else if (!from) {
    return true;
  }
  const bool sampling = bpf_ktime_get_ns() >= from;
  tensor_cache_put(c, key, sampling ? 0 : from);
  return sampling;
}

/* An exec or the exit of |tgid|: its next image starts a start-up of its own,
 * and a reused pid does not inherit one. The entry goes before the
 * generation moves on, so that no CPU caches it again under the new one. */
static __always_inline void tensor_sampling_forget(__u32 tgid) {
  if (!tensor_sample_after_ns)
    return;
  bpf_map_delete_elem(&tensor_sample_from, &tgid);
  __sync_fetch_and_add(&tensor_sample_gen, 1);
}

#endif /* GPUFLAME_BPF_LIB_TENSOR_SAMPLING_BPF_H_ */
