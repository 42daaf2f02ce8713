/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PyTorch's CUDA caching allocator: tensor-level blocks, carved out of what
 * cudaMalloc handed out. A uprobe on c10::reportMemoryUsageToProfiler (the
 * block's size, as memory_allocated() counts it); the USDT notes
 * pytorch:malloc/free (the requested size) where libc10.so lacks it.
 */
#ifndef GPUFLAME_BPF_TORCH_ALLOC_BPF_H_
#define GPUFLAME_BPF_TORCH_ALLOC_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "gpuflame_abi.h"
#include "lib/alloc_records.bpf.h"
#include "lib/config.bpf.h"
#include "lib/emit.bpf.h"
#include "lib/targets.bpf.h"
#include "lib/tensor_sampling.bpf.h"

#define GF_TORCH_DEVICE_CUDA 1 /* c10::DeviceType::CUDA */

/* The last rung of the guardrails' CPU ladder: tensor events stop, counted. */
static __always_inline bool tensor_events_shed(void) {
  if (!(shed & GF_SHED_TENSOR_EVENTS))
    return false;
  bump(GF_STAT_SHED_TENSOR_EVENTS);
  return true;
}

/* While sampling, a Bernoulli draw per allocation, taken with probability
 * size / GF_PROBE_TENSOR_SAMPLE_BYTES, so that no sampler state is shared
 * between CPUs or threads. False for an allocation not taken (counted); one
 * taken while sampling gets GF_EVF_SAMPLED in |flags|. */
static __always_inline bool tensor_taken(__u32 tgid, __u64 size, __u32 *flags) {
  if (!tensor_sampling(tgid))
    return true;
  *flags = GF_EVF_SAMPLED;
  if (size >= GF_PROBE_TENSOR_SAMPLE_BYTES)
    return true;
  /* Both sides under 2^54: the draw is 32 bits, the interval 2^22. */
  if ((__u64)bpf_get_prandom_u32() * GF_PROBE_TENSOR_SAMPLE_BYTES < size << 32)
    return true;
  bump(GF_STAT_TENSOR_NOT_SAMPLED);
  return false;
}

static __always_inline __u32 tensor_free_flags(__u32 tgid) {
  return tensor_sampling(tgid) ? GF_EVF_SAMPLED : 0;
}

SEC("usdt")
int BPF_USDT(torch_malloc, __u64 ptr, __s64 device, __u64 size, __u64 stream) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32) || tensor_events_shed() || bench_stop(GF_STAGE_ENTRY))
    return 0;
  __u32 flags = 0;
  if (bench_stop(GF_STAGE_FREE) || !tensor_taken(id >> 32, size, &flags))
    return 0;
  submit_with_stack(ctx, GF_DOMAIN_TORCH, GF_API_TORCH_MALLOC, flags, ptr, size, (__u64)device,
                    stream, 0);
  return 0;
}

SEC("usdt")
int BPF_USDT(torch_free, __u64 ptr) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32) || tensor_events_shed() || bench_stop(GF_STAGE_ENTRY))
    return 0;
  submit_free(GF_DOMAIN_TORCH, GF_API_TORCH_FREE, tensor_free_flags(id >> 32), ptr);
  return 0;
}

/* c10::reportMemoryUsageToProfiler(void *ptr, int64_t delta, size_t allocated,
 * size_t reserved, c10::Device device): the fallback for builds without USDT
 * notes. Called on every caching-allocator alloc (+size) and free (-size). */
SEC("uprobe")
int torch_report(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32) || tensor_events_shed() || bench_stop(GF_STAGE_ENTRY))
    return 0;
  /* c10::Device{DeviceType type, DeviceIndex index}: CUDA only (the CPU
   * allocator reports here too while a memory profiler runs). */
  if ((PT_REGS_PARM5(ctx) & 0xff) != GF_TORCH_DEVICE_CUDA)
    return 0;
  __u64 ptr = PT_REGS_PARM1(ctx);
  __s64 delta = (__s64)PT_REGS_PARM2(ctx);
  __u64 allocated = PT_REGS_PARM3(ctx);
  __u64 reserved = PT_REGS_PARM4(ctx);
  __u64 device = (PT_REGS_PARM5(ctx) >> 8) & 0xff; /* c10::Device{type, index} */
  if (delta > 0) {
    __u32 flags = 0;
    if (bench_stop(GF_STAGE_FREE) || !tensor_taken(id >> 32, (__u64)delta, &flags))
      return 0;
    submit_with_stack(ctx, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, flags, ptr, (__u64)delta, device,
                      allocated, reserved);
  } else if (delta < 0) {
    struct gf_event ev;
    fill_header(&ev, GF_EV_FREE, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, ptr, (__u64)(-delta));
    ev.flags = tensor_free_flags(id >> 32);
    ev.arg0 = device;
    ev.arg1 = allocated;
    ev.arg2 = reserved;
    submit_small(&ev);
  }
  return 0;
}

/* c10::reportOutOfMemoryToProfiler(int64_t alloc_size, size_t allocated,
 * size_t reserved, c10::Device device) (GF_TORCH_OOM_SYMBOL): the caching
 * allocator has freed its cache, retried, failed again, and is about to
 * throw OutOfMemoryError. Runs only then; never shed (one record per OOM,
 * and the one that says how it ended). */
SEC("uprobe")
int torch_oom(struct pt_regs *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  if (!wanted(id >> 32))
    return 0;
  if ((PT_REGS_PARM4(ctx) & 0xff) != GF_TORCH_DEVICE_CUDA)
    return 0;
  submit_stack_kind(ctx, GF_EV_OOM_REPORT, GF_DOMAIN_TORCH, GF_API_TORCH_REPORT, 0, 0, PT_REGS_PARM1(ctx),
                    (PT_REGS_PARM4(ctx) >> 8) & 0xff, PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx));
  return 0;
}

#endif /* GPUFLAME_BPF_TORCH_ALLOC_BPF_H_ */
