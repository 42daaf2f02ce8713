/* SPDX-License-Identifier: Apache-2.0 */
/*
 * In-process tensor events: libgpuflame_cupti.so hooks PyTorch's caching
 * allocator from inside the workload and walks the Python stack there, so no
 * allocator event traps into the kernel; it hands the records over in batches
 * at gpuflame:tensor_batch (inprocess/tensor_events.cc). This program only
 * copies a batch on: one trap per up to GF_TENSOR_BATCH_MAX bytes of events.
 * User space splits it into its inner records (gpuflame_abi.h).
 */
#ifndef GPUFLAME_BPF_TENSOR_BATCH_BPF_H_
#define GPUFLAME_BPF_TENSOR_BATCH_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>

#include "gpuflame_abi.h"
#include "lib/config.bpf.h"
#include "lib/emit.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

struct gf_record_tensor_batch {
  struct gf_event ev;
  __u8 bytes[GF_TENSOR_BATCH_MAX];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gf_record_tensor_batch);
} scratch_tensor SEC(".maps");

/* gpuflame:tensor_batch(records, bytes): copied whole before the library
 * reuses its buffer; a batch that cannot be read is counted (events lost). */
SEC("usdt")
int BPF_USDT(tensor_batch, __u64 records, __u64 bytes) {
  if (!wanted(bpf_get_current_pid_tgid() >> 32))
    return 0;
  /* The last rung of the guardrails' CPU ladder: whole batches go (counted
   * once each), and the stacks they defined with them ([stack not received]
   * until the library sends them again). */
  if (shed & GF_SHED_TENSOR_EVENTS) {
    bump(GF_STAT_SHED_TENSOR_EVENTS);
    return 0;
  }
  __u32 zero = 0;
  struct gf_record_tensor_batch *r = bpf_map_lookup_elem(&scratch_tensor, &zero);
  if (!r || bytes == 0)
    return 0;
  if (bytes > GF_TENSOR_BATCH_MAX) {
    bump(GF_STAT_TENSOR_BATCH_READ_FAILED);
    return 0;
  }
  __u32 n = (__u32)bytes;
  asm volatile("" : "+r"(n));
  if (n > GF_TENSOR_BATCH_MAX)
    n = GF_TENSOR_BATCH_MAX;
  if (n == 0 || bpf_probe_read_user(r->bytes, n, (const void *)records)) {
    bump(GF_STAT_TENSOR_BATCH_READ_FAILED);
    return 0;
  }
  fill_header(&r->ev, GF_EV_TENSOR_BATCH, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0, n);
  __u64 len = sizeof(struct gf_event) + (__u64)n;
  if (len > sizeof(*r))
    len = sizeof(*r);
  if (emit(r, len, false))
    bump(GF_STAT_TENSOR_BATCHES);
  return 0;
}

#endif /* GPUFLAME_BPF_TENSOR_BATCH_BPF_H_ */
