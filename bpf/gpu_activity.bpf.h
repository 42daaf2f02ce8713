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

#include <bpf/bpf_core_read.h>
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

/* The calling thread's ID as its own PID namespace numbers it: what a
 * process in a container calls it, and CUPTI's records with it (the host's
 * outside any). Namespaces nest at most 32 deep (MAX_PID_NS_LEVEL). */
static __always_inline __u32 ns_tid(__u32 host_tid) {
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  struct pid *pid = BPF_CORE_READ(task, thread_pid);
  unsigned int level = BPF_CORE_READ(pid, level);
  int nr = 0;
  if (!pid || bpf_probe_read_kernel(&nr, sizeof(nr), &pid->numbers[level & 31].nr) || nr <= 0)
    return host_tid;
  return (__u32)nr;
}

/* The launch route (gpuflame_abi.h): a launch entered one of libcuda's
 * exported launch entry points. Attached to one process, and only while its
 * library's launch window is open: the trap would cost every launch. The
 * attach cookie is GF_LAUNCH_API(1, the entry's CUPTI callback ID). */
SEC("uprobe")
int launch_entry(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  bump(GF_STAT_LAUNCH_HITS);
  __u64 api = bpf_get_attach_cookie(ctx);
  __u64 tid = ns_tid((__u32)id);
  if (want_user_stack(1))
    submit_with_user_stack(ctx, GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, GF_EVF_LAUNCH_HIT, tid, 0,
                           0, api, 0);
  else
    submit_stack_kind(ctx, GF_EV_KERNEL_LAUNCH, GF_DOMAIN_LAUNCH, GF_API_NONE, GF_EVF_LAUNCH_HIT, tid, 0, 0,
                      api, 0);
  return 0;
}

/* A switch: a gpuflame USDT probe attached only to raise its semaphore,
 * which the library reads; its site is never hit. One program for all:
 *  - gpuflame:kernel_time_exact: CUPTI activity on all the time;
 *  - gpuflame:tensor_exact: every in-process tensor allocation, not a
 *    sample by bytes;
 *  - gpuflame:launch_route: this agent takes launch stacks at libcuda's
 *    entry points (launch_entry). */
SEC("usdt")
int BPF_USDT(usdt_switch) { return 0; }

/* gpuflame:launch_window(open): the library's launch records went on (1)
 * or are about to go off (0); user space attaches or detaches launch_entry
 * for the process. */
SEC("usdt")
int BPF_USDT(launch_window, __u64 open) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_LAUNCH_WINDOW, GF_DOMAIN_NONE, GF_API_NONE, 0, 0);
  ev.arg0 = open ? 1 : 0;
  submit_small(&ev);
  return 0;
}

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

/* A run of the library's gf_api_records as a |kind| record, copied whole
 * before the library reuses its buffer; |lost|: the library's count of
 * those it could not keep or convert, passed on. */
static __always_inline void copy_api_records(__u8 kind, __u64 records, __u64 count, __u64 lost, __u32 stat_copied,
                                             __u32 stat_failed) {
  struct gf_record_gpu *r = gpu_scratch();
  if (!r) return;
  if (count > GF_API_BATCH_MAX) count = GF_API_BATCH_MAX;
  fill_header(&r->ev, kind, GF_DOMAIN_NONE, GF_API_NONE, 0, count);
  r->ev.arg0 = lost;
  __u32 bytes = (__u32)count * sizeof(struct gf_api_record);
  if (bytes > sizeof(r->apis)) bytes = sizeof(r->apis);
  if (bytes == 0) return;
  if (bpf_probe_read_user(r->apis, bytes, (const void *)records)) {
    bump(stat_failed);
    return;
  }
  __u64 len = sizeof(struct gf_event) + bytes;
  if (len > sizeof(*r)) len = sizeof(*r);
  if (emit(r, len, false)) bump_by(stat_copied, count);
}

/* gpuflame:api_batch(records, count, dropped): CUDA API calls, entry to
 * return; |dropped|: the library's count of calls it could not keep. */
SEC("usdt")
int BPF_USDT(api_batch, __u64 records, __u64 count, __u64 dropped) {
  copy_api_records(GF_EV_API_BATCH, records, count, dropped, GF_STAT_API_RECORDS, GF_STAT_API_BATCH_READ_FAILED);
  return 0;
}

/* gpuflame:launch_records(records, count, unconverted): the driver's launch
 * calls as CUPTI recorded them in a launch window (the launch route). */
SEC("usdt")
int BPF_USDT(launch_records, __u64 records, __u64 count, __u64 unconverted) {
  copy_api_records(GF_EV_LAUNCH_RECORDS, records, count, unconverted, GF_STAT_LAUNCH_RECORDS,
                   GF_STAT_LAUNCH_RECORDS_READ_FAILED);
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
