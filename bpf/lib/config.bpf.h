/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The knobs user space sets before load (the skeleton's rodata): constants
 * to the verifier, so a branch on one that is off is pruned, costing nothing.
 */
#ifndef GPUFLAME_BPF_LIB_CONFIG_BPF_H_
#define GPUFLAME_BPF_LIB_CONFIG_BPF_H_

#include "vmlinux_min.h"

#include "gpuflame_abi.h"
#include "stats.bpf.h"

const volatile bool filter_targets = false; /* only processes in `targets` */
const volatile bool capture_native_fallback = true;
/* Wake the reader only past this much unread data (or for urgent records):
 * a wakeup per record costs an irq_work and a cross-CPU interrupt, which
 * dwarfed everything else per allocation. User space polls on a short timer. */
const volatile __u64 wakeup_bytes = 1 << 20;
/* The events ring's size (user space sizes it). */
const volatile __u64 ring_bytes = 16 << 20;
/* Copy registers and the top of the user stack for DWARF unwinding in user
 * space: 0 never, 1 device-level events (rare: caching-allocator misses),
 * 2 every allocation (costly on the tensor hot path). */
const volatile __u32 native_stacks = 1;
/* Send a Python stack the process sent before as its ID (lib/stack_ids.bpf.h).
 * Off only in benchmarks, to measure what it saves. */
const volatile bool intern_stacks = true;
/* Send every synchronise call's return (GF_EV_CUDA_SYNC): where kernel time
 * or the timeline takes them. Off (the agent): only the calls whose entry
 * was sent (NCCL processes: bpf/cuda_sync.bpf.h), which close them. */
const volatile bool sync_returns_all = true;
/* Model-loading I/O (io_calls.bpf.h, attached only with the timeline): a
 * read or pread64 is sent when it returned at least io_min_bytes or took at
 * least io_min_ns; each process sends at most io_max_per_process records. */
const volatile __u64 io_min_bytes = 65536;
const volatile __u64 io_min_ns = 1000000;
const volatile __u32 io_max_per_process = 20000;
/* Machine-wide: stop a process that maps a watched library file no process
 * has mapped before (not in covered_files) until user space has attached. */
const volatile bool gate_new_files = false;
/* Probes are attached per process (record), not per file for the machine
 * (the agent): a followed process's forked child has its parent's
 * breakpoints but none that fire for it, so it says so (GF_EV_FORKED) as
 * it returns from fork, before it runs anything. */
const volatile bool follow_forks = false;

/* The probes' tensor allocations sampled by bytes (as under
 * GF_SHED_TENSOR_SAMPLED) from this long (ns) after a process's first
 * caching-allocator event on: the agent's default (tensor_sampling:
 * sampled), which keeps a process's start-up (model load, KV cache) exact
 * (lib/tensor_sampling.bpf.h). 0: exact, unless the guardrails sample. */
const volatile __u64 tensor_sample_after_ns = 0;

/* gpuflame's own process: never watched nor gated. It loads the driver's
 * NVML, which maps libcuda.so.1: machine-wide, the gate for new library
 * files stopped gpuflame itself there, with nobody left to resume it. */
const volatile __u32 self_tgid = 0;

/* Benchmarks only: return after this enum gf_bench_stage of the allocation
 * path (gpuflame_abi.h); 0 everywhere else, pruned at load. */
const volatile __u32 bench_stop_at = 0;
static __always_inline bool bench_stop(__u32 stage) {
  return bench_stop_at == stage;
}

/* What gpuflame's guardrails shed now (enum gf_shed). Not rodata: user space
 * changes it at run time through the skeleton's .bss mapping, so reading it
 * is one load, no map lookup, on every event. */
volatile __u32 shed = 0;

/* Set by user space when it stops reading: from then on nothing is gated
 * (bpf/process_lifecycle.bpf.h), since nobody would resume it. The probes
 * stay attached a while after gpuflame exits (the kernel detaches them
 * slowly), so without this a process could be stopped after the end. */
volatile bool gates_open = false;

/* Set by user space once gpuflame's guardian holds its own descriptor of
 * `held` (bpf/process_lifecycle.bpf.h). Until then the machine-wide gate
 * stops nobody: a process it stopped, which user space may not have heard
 * of yet, is found again after gpuflame is killed only through that map.
 * (record's own command is gated regardless: its guardian knows it by pid.) */
volatile bool held_guarded = false;

/* Whether to copy the user stack for an event that wants native frames at
 * |level| (1: device-level, 2: every allocation); a copy shed by the
 * guardrails is counted, and so is one skipped under ring pressure: with the
 * ring over half full, a 16 KB copy would take the room of some thirty
 * records with Python frames, and a full ring loses whole events. The event
 * goes with its Python frames until the reader catches up (a burst of 4
 * processes x 4 threads allocating on 2 cores lost 70% of its records). */
static __always_inline bool want_user_stack(__u32 level) {
  if (native_stacks < level)
    return false;
  if (shed & GF_SHED_NATIVE_STACKS) {
    bump(GF_STAT_SHED_NATIVE_STACKS);
    return false;
  }
  if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ring_bytes / 2) {
    bump(GF_STAT_PRESSURE_NATIVE_STACKS);
    return false;
  }
  return true;
}

#endif /* GPUFLAME_BPF_LIB_CONFIG_BPF_H_ */
