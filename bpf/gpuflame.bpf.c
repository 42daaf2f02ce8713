// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * gpuflame's kernel side, the root of its one BPF object and skeleton
 * (gpuflame_bpf.skel.h): probes on CUDA's allocation APIs and PyTorch's
 * caching allocator, each allocation joined with the calling thread's Python
 * stack; CPU samples; GPU kernel time from the injection library; and the
 * process-lifecycle hooks that let user space attach before a new process
 * allocates anything.
 *
 * One concern per file, each a .bpf.h included here:
 *   cuda_alloc.bpf.h         cudaMalloc/cuMemAlloc/cuMemCreate/cuMemMap/... uprobes
 *   torch_alloc.bpf.h        PyTorch caching allocator: USDT, uprobe fallback,
 *                            its out-of-memory report
 *   cpu_sampler.bpf.h        CPU time (perf_event)
 *   gpu_activity.bpf.h       libgpuflame_cupti.so's USDT probes: launch,
 *                            kernel_batch, api_batch, kernel_name, status
 *   tensor_batch.bpf.h       the same library's in-process tensor events
 *   autograd_origin.bpf.h    Engine::execute's entry: whom autograd's engine
 *                            threads work for (the probes' backward origin)
 *   process_lifecycle.bpf.h  exec, library mmaps, fork, exit, Py_FinalizeEx,
 *                            and the SIGSTOP gates
 *   nccl_calls.bpf.h         every NCCL API call, entry (with its stack) and return
 *   cuda_sync.bpf.h          CUDA synchronise calls: each wait, with its stack, at return
 *                            (and at entry in NCCL processes: GPU-side hangs)
 *   io_calls.bpf.h           model-loading syscalls (openat, read, pread64, file mmap,
 *                            GPU ioctl) for the timeline, one record at return
 * and the helpers they share in lib/: config (load-time knobs), maps (shared
 * with user space), stats, targets (filtering), emit (ring-buffer output),
 * stacks (stack capture), backward_callers (who a Python-less thread works
 * for), alloc_records (ALLOC/FREE), nccl_procs (processes that issued NCCL
 * collectives), python_stack (the
 * CPython walker), vmlinux_min (the kernel types we read, CO-RE).
 *
 * Includes, not separately compiled objects linked with `bpftool gen object`:
 * every concern shares the ring buffer, the counters, the target map and the
 * rodata knobs; linked objects would each need extern (or identical __weak)
 * declarations of those, kept in sync by hand, for no gain. The verifier and
 * the skeleton see one object either way. The user-space names (programs,
 * maps, rodata) are those of profiler/probes/bpf_probes.cc and probe_table.cc.
 *
 * Hot-path rules: filter first, one per-CPU scratch record per slot (the
 * sampler may fire inside a probe: lib/stacks.bpf.h, GF_SLOTS), raw addresses
 * only, frees carry no stack, every drop is counted in `stats`, and the BPF
 * stack stays well under its 512 bytes (records are built in scratch maps).
 */
#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* USDT specs (struct gf_usdt_spec), written by user space, one per distinct
 * argument layout: a library's sites share theirs across every process that
 * maps it (profiler/probes/usdt_specs.h). 2048 is an array of ~420 KiB,
 * allocated once; past it an attach fails and says so (ProcessRegistry's
 * warnings). */
#define BPF_USDT_MAX_SPEC_CNT 2048

#include "cuda_alloc.bpf.h"
#include "torch_alloc.bpf.h"
#include "cpu_sampler.bpf.h"
#include "gpu_activity.bpf.h"
#include "tensor_batch.bpf.h"
#include "autograd_origin.bpf.h"
#include "nccl_calls.bpf.h"
#include "cuda_sync.bpf.h"
#include "process_lifecycle.bpf.h" /* its exit hook clears the per-thread maps above */
#include "io_calls.bpf.h"           /* after it: its fd_file() */

/* User space writes libbpf's USDT specs in the ABI's layout. */
_Static_assert(sizeof(struct __bpf_usdt_spec) == sizeof(struct gf_usdt_spec), "USDT spec size");
_Static_assert(BPF_USDT_MAX_ARG_CNT == GF_USDT_MAX_ARGS, "USDT argument count");
_Static_assert(__builtin_offsetof(struct __bpf_usdt_spec, usdt_cookie) ==
                   __builtin_offsetof(struct gf_usdt_spec, usdt_cookie),
               "USDT spec cookie");
_Static_assert(__builtin_offsetof(struct __bpf_usdt_spec, arg_cnt) == __builtin_offsetof(struct gf_usdt_spec, arg_cnt),
               "USDT spec argument count");
_Static_assert(sizeof(struct __bpf_usdt_arg_spec) == sizeof(struct gf_usdt_arg_spec), "USDT argument spec size");
_Static_assert(__builtin_offsetof(struct __bpf_usdt_arg_spec, arg_type) ==
                   __builtin_offsetof(struct gf_usdt_arg_spec, arg_type),
               "USDT argument type");
_Static_assert(__builtin_offsetof(struct __bpf_usdt_arg_spec, reg_off) ==
                   __builtin_offsetof(struct gf_usdt_arg_spec, reg_off),
               "USDT argument register");
_Static_assert(__builtin_offsetof(struct __bpf_usdt_arg_spec, arg_signed) ==
                   __builtin_offsetof(struct gf_usdt_arg_spec, arg_signed),
               "USDT argument sign");
_Static_assert(__builtin_offsetof(struct __bpf_usdt_arg_spec, arg_bitshift) ==
                   __builtin_offsetof(struct gf_usdt_arg_spec, arg_bitshift),
               "USDT argument shift");
_Static_assert(BPF_USDT_ARG_CONST == GF_USDT_ARG_CONST && BPF_USDT_ARG_REG == GF_USDT_ARG_REG &&
                   BPF_USDT_ARG_REG_DEREF == GF_USDT_ARG_REG_DEREF,
               "USDT argument types");
