// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/* The overhead harness's baseline: a probe that only counts its hits, on the
 * same USDT points gpuflame uses. What it costs is the kernel's trap itself. */
#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} hits SEC(".maps");

SEC("usdt")
int BPF_USDT(noop_hit) {
  __u32 zero = 0;
  __u64 *v = bpf_map_lookup_elem(&hits, &zero);
  if (v)
    *v += 1;
  return 0;
}
