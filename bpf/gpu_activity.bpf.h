/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU kernel time: the USDT probes (provider `gpuflame`) that the injection
 * library libgpuflame_cupti.so fires from inside the workload (cupti/probes.h).
 * Launch stacks are taken here; the GPU activity itself is only copied on,
 * as plain gf_kernel_record structs, and joined in user space.
 */
#ifndef GPUFLAME_BPF_GPU_ACTIVITY_BPF_H_
#define GPUFLAME_BPF_GPU_ACTIVITY_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>

#include "gpuflame_abi.h"
#include "lib/config.bpf.h"
#include "lib/emit.bpf.h"
#include "lib/stacks.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

struct gf_record_gpu {
  struct gf_event ev;
  union {
    struct gf_kernel_record recs[GF_KERNEL_BATCH_MAX];
    struct gf_api_record apis[GF_API_BATCH_MAX];
    char name[GF_KERNEL_NAME_MAX];
  };
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gf_record_gpu);
} scratch_gpu SEC(".maps");

/* gpuflame:launch(correlation, api, origin, concurrent): a sampled launch,
 * on the launching thread: its stack is what the kernel's time is charged
 * to. From a thread that runs no Python while backward() runs, the
 * library adds the backward caller's stack ID (origin) or, with several
 * calls active, their count (concurrent), passed on as arg2 and size. A
 * library from before these arguments fires two: libbpf reads the missing
 * ones as 0 (no origin). */
SEC("usdt")
int BPF_USDT(kernel_launch, __u64 correlation, __u64 api, __u64 origin, __u64 concurrent) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  bump(GF_STAT_LAUNCHES);
  /* The library named the backward() caller itself: BPF does not look for it. */
  __u32 flags = origin || concurrent > 1 ? GF_EVF_AUTOGRAD : 0;
  if (want_user_stack(1))
    submit_with_user_stack(ctx, GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, flags, 0, concurrent,
                           correlation, api, origin);
  else
    submit_stack_kind(ctx, GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, flags, 0, concurrent,
                      correlation, api, origin);
  return 0;
}

/* gpuflame:kernel_time_exact(): attached only to raise its semaphore, which
 * keeps the library's CUPTI activity on all the time; the site is never hit. */
SEC("usdt")
int BPF_USDT(kernel_time_exact) { return 0; }

/* gpuflame:tensor_exact(): the same, for in-process tensor events: every
 * allocation, not a sample by bytes. */
SEC("usdt")
int BPF_USDT(tensor_exact) { return 0; }

/* One of libgpuflame_cupti.so's hello sites (GF_HELLO_SITES): attached only
 * so that its semaphore counts this agent in; the site is never hit. */
SEC("uprobe")
int hello(void *ctx) { return 0; }

/* One of libgpuflame_cupti.so's thrift sites (GF_THRIFT_SITES): attached
 * only so that its semaphore counts one more level of thrift asked of the
 * library by an agent over its overhead budget; the site is never hit. */
SEC("uprobe")
int thrift(void *ctx) { return 0; }

/* The per-CPU scratch record for a GPU record of a followed process, or
 * NULL (not followed, or the lookup failed). */
static __always_inline struct gf_record_gpu *gpu_scratch(void) {
  if (!wanted(bpf_get_current_pid_tgid() >> 32))
    return NULL;
  __u32 zero = 0;
  return bpf_map_lookup_elem(&scratch_gpu, &zero);
}

/* gpuflame:kernel_batch(records, count): completed GPU work, copied whole
 * before the library reuses its buffer. */
SEC("usdt")
int BPF_USDT(kernel_batch, __u64 records, __u64 count) {
  struct gf_record_gpu *r = gpu_scratch();
  if (!r)
    return 0;
  if (count > GF_KERNEL_BATCH_MAX)
    count = GF_KERNEL_BATCH_MAX;
  fill_header(&r->ev, GF_EV_KERNEL_BATCH, GF_DOMAIN_NONE, GF_API_NONE, 0, count);
  __u32 bytes = (__u32)count * sizeof(struct gf_kernel_record);
  if (bytes > sizeof(r->recs))
    bytes = sizeof(r->recs);
  if (bytes == 0)
    return 0;
  if (bpf_probe_read_user(r->recs, bytes, (const void *)records)) {
    bump(GF_STAT_KERNEL_BATCH_READ_FAILED);
    return 0;
  }
  __u64 len = sizeof(struct gf_event) + bytes;
  if (len > sizeof(*r))
    len = sizeof(*r);
  if (emit(r, len, false))
    bump_by(GF_STAT_KERNEL_RECORDS, count);
  return 0;
}

/* gpuflame:api_batch(records, count, dropped): CUDA API calls, entry to
 * return, copied whole before the library reuses its buffer; |dropped|: the
 * library's count of calls it could not keep, passed on. */
SEC("usdt")
int BPF_USDT(api_batch, __u64 records, __u64 count, __u64 dropped) {
  struct gf_record_gpu *r = gpu_scratch();
  if (!r) return 0;
  if (count > GF_API_BATCH_MAX) count = GF_API_BATCH_MAX;
  fill_header(&r->ev, GF_EV_API_BATCH, GF_DOMAIN_NONE, GF_API_NONE, 0, count);
  r->ev.arg0 = dropped;
  __u32 bytes = (__u32)count * sizeof(struct gf_api_record);
  if (bytes > sizeof(r->apis)) bytes = sizeof(r->apis);
  if (bytes == 0) return 0;
  if (bpf_probe_read_user(r->apis, bytes, (const void *)records)) {
    bump(GF_STAT_API_BATCH_READ_FAILED);
    return 0;
  }
  __u64 len = sizeof(struct gf_event) + bytes;
  if (len > sizeof(*r)) len = sizeof(*r);
  if (emit(r, len, false)) bump_by(GF_STAT_API_RECORDS, count);
  return 0;
}

/* gpuflame:kernel_name(id, name): each distinct kernel name, once. */
SEC("usdt")
int BPF_USDT(kernel_name, __u64 name_id, __u64 name) {
  struct gf_record_gpu *r = gpu_scratch();
  if (!r)
    return 0;
  fill_header(&r->ev, GF_EV_KERNEL_NAME, GF_DOMAIN_NONE, GF_API_NONE, 0, 0);
  r->ev.arg0 = name_id;
  long n = bpf_probe_read_user_str(r->name, sizeof(r->name), (const void *)name);
  if (n <= 0)
    return 0;
  __u64 len = sizeof(struct gf_event) + (__u64)n;
  if (len > sizeof(*r))
    len = sizeof(*r);
  emit(r, len, false);
  return 0;
}

/* gpuflame:status(code, abi_version, cupti_ns, mono_before, mono_after): the
 * injection library is active, or stepped aside, and which GF_ABI_VERSION it
 * was built with. A library from before versioning fires it with one
 * argument: libbpf reads the missing second as 0, which user space takes as
 * a mismatch. The version is only passed on: the check is user space's
 * (event_processor.cc). The clock pair (gf_status_clock in gpuflame_abi.h)
 * goes to addr, size and arg2; a library from before it sends none (0). */
SEC("usdt")
int BPF_USDT(cupti_status, __u64 code, __u64 abi_version, __u64 cupti_ns, __u64 mono_before, __u64 mono_after) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_CUPTI_STATUS, GF_DOMAIN_NONE, GF_API_NONE, 0, 0);
  ev.arg0 = code;
  ev.arg1 = abi_version;
  ev.addr = cupti_ns;
  ev.size = mono_before;
  ev.arg2 = mono_after;
  submit_small(&ev);
  return 0;
}

/* gpuflame:lib_cost(hook_calls, hook_ns, callback_ns, thread_ns, cupti_ns):
 * the library's own cost in its process so far (GF_EV_LIB_COST). */
SEC("usdt")
int BPF_USDT(lib_cost, __u64 hook_calls, __u64 hook_ns, __u64 callback_ns, __u64 thread_ns, __u64 cupti_ns) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_LIB_COST, GF_DOMAIN_NONE, GF_API_NONE, 0, 0);
  ev.addr = hook_calls;
  ev.size = hook_ns;
  ev.arg0 = callback_ns;
  ev.arg1 = thread_ns;
  ev.arg2 = cupti_ns;
  submit_small(&ev);
  return 0;
}

#endif /* GPUFLAME_BPF_GPU_ACTIVITY_BPF_H_ */
