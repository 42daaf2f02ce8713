// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/* A route to launch stacks without CUPTI's callbacks, measured before it is
 * built (bench/launch_uprobes.cc): a uprobe on each of libcuda's exported
 * launch entry points, counting its hits by entry point (the attach
 * cookie) and, with |record|, sending each hit's thread and CLOCK_MONOTONIC
 * time, to be joined to CUPTI's API activity records of the same calls
 * (tests/gpu/join_launches.py). No stack: what this costs is the trap. */
#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define LAUNCH_SYMBOLS 16

const volatile __u32 record = 0;

struct launch_hit {
  __u32 pid;
  __u32 tid;
  __u64 ns;
  __u32 symbol;
  __u32 pad;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, LAUNCH_SYMBOLS + 1); /* the last: hits the ring had no room for */
  __type(key, __u32);
  __type(value, __u64);
} hits SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 << 20);
} launches SEC(".maps");

static __always_inline void bump(__u32 i) {
  __u64 *v = bpf_map_lookup_elem(&hits, &i);
  if (v)
    *v += 1;
}

SEC("uprobe")
int launch_hit(struct pt_regs *ctx) {
  __u32 symbol = (__u32)bpf_get_attach_cookie(ctx) & (LAUNCH_SYMBOLS - 1);
  bump(symbol);
  if (!record)
    return 0;
  struct launch_hit *h = bpf_ringbuf_reserve(&launches, sizeof(*h), 0);
  if (!h) {
    bump(LAUNCH_SYMBOLS);
    return 0;
  }
  __u64 id = bpf_get_current_pid_tgid();
  h->pid = id >> 32;
  h->tid = (__u32)id;
  h->ns = bpf_ktime_get_ns();
  h->symbol = symbol;
  h->pad = 0;
  bpf_ringbuf_submit(h, 0);
  return 0;
}
