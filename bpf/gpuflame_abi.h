/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one contract between the BPF programs and user space: plain data only.
 * Every struct has fixed-width fields, explicit padding and a size assertion,
 * and is included unchanged by the BPF programs (bpf/), by profiler/ (C++)
 * and by the CUPTI injection library (cupti/).
 *
 * Wire layout of one ring-buffer record:
 *
 *   +--------------------+---------------------------+----------------------+
 *   | struct gf_event    | py_count x gf_py_frame    | native_count x u64   |
 *   | (72 bytes)         | (24 bytes each, leaf 1st) | (user IPs, leaf 1st) |
 *   +--------------------+---------------------------+----------------------+
 *
 * or, for a Python stack the process sent before, its ID in place of the
 * frames (GF_EVF_STACK_ID; struct gf_stack_id below):
 *
 *   | struct gf_event (py_count: the stack's frames) | gf_stack_id (16) |
 *
 * Raw addresses only: names are resolved in user space (memray's rule).
 */
#ifndef GPUFLAME_BPF_GPUFLAME_ABI_H_
#define GPUFLAME_BPF_GPUFLAME_ABI_H_

/*
 * GF_ABI_VERSION: the version of the one half of this contract that ships
 * apart from the agent. The BPF object is embedded in the gpuflame binary
 * (skeleton), so BPF and user space always match; libgpuflame_cupti.so is
 * loaded into workloads, often from an image built at another time, and
 * talks to the agent through the `gpuflame` USDT probes (cupti/probes.h).
 *
 * Bump it on any change an agent or a library built on the other side of
 * the change would misread: a gpuflame USDT probe's name, argument order or
 * meaning; struct gf_kernel_record; GF_KERNEL_BATCH_MAX, GF_KERNEL_NAME_MAX;
 * enum gf_gpu_activity_kind or enum gf_cupti_status values. A purely
 * additive change the other side safely ignores (a new probe an older agent
 * does not attach) needs none. Versions are compared for equality only.
 *
 * The check is the agent's: the library passes the version it was built
 * with as the second argument of gpuflame:status (GF_EV_CUPTI_STATUS arg1;
 * a library from before versioning sends none, read as 0), and on mismatch
 * the agent ignores that process's kernel records and warns once. The
 * library cannot check in-process: USDT is one-way (the semaphores only say
 * that some tracer is attached), so it cannot know the agent's version, and
 * it never steps aside on this account.
 *
 * v1: the first versioned contract.
 * v2: gf_kernel_record.weight (records of duty-cycled activity stand for
 *     more than themselves; a v1 agent would under-count them). With it,
 *     additively: gpuflame:launch's third and fourth arguments (backward
 *     origin), GF_EVF_AUTOGRAD*, GF_EV_AUTOGRAD_HOOK, gpuflame:lib_cost
 *     (GF_EV_LIB_COST), gpuflame:kernel_time_exact. A library without the
 *     launch arguments sends none (read as 0: no origin).
 * v3: in-process tensor allocations may be sampled by bytes (GF_EVF_SAMPLED
 *     adds a payload word a v2 agent would misparse); gpuflame:tensor_exact
 *     switches sampling off. With it, additively: the hello sites
 *     (GF_HELLO_SITES); the inner record GF_EV_OOM_REPORT (a v3 agent from
 *     before it counts it as malformed and reads on; no record changed).
 * v4: gf_kernel_record.bytes (what a copy or memset moved) and the record
 *     kind GF_GPU_SYNC (a CPU thread waiting in a CUDA synchronise call,
 *     from CUPTI's SYNCHRONIZATION activity): a v3 agent would charge a
 *     sync record's wait to the GPU as work, and misread every record.
 * v5: the record kind GF_GPU_ACTIVITY_WINDOW (a span in which the
 *     library's CUPTI activity was on: what the agent judges busy and idle
 *     time in, since while activity is off "no records" cannot be told from
 *     "GPU idle"); a v4 agent would count it as GPU work. From v5 on,
 *     consumers ignore record kinds they do not know, so a new kind is
 *     additive. With it, additively: gpuflame:api_batch (gf_api_record,
 *     GF_EV_API_BATCH), which an agent that does not attach it never gets;
 *     gpuflame:flushed, whose code GF_CUPTI_FLUSHED only an agent that
 *     attached that probe ever reads.
 */
#define GF_ABI_VERSION 5

#ifdef __cplusplus
#include <cstdint>
typedef uint8_t gf_u8;
typedef uint16_t gf_u16;
typedef uint32_t gf_u32;
typedef uint64_t gf_u64;
#define GF_STATIC_ASSERT(c, m) static_assert(c, m)
#else
typedef __u8 gf_u8;
typedef __u16 gf_u16;
typedef __u32 gf_u32;
typedef __u64 gf_u64;
#define GF_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#define GF_MAX_PY_FRAMES 128 /* a power of two: the BPF walker masks with it */
#define GF_MAX_NATIVE_FRAMES 64

/* What happened. */
enum gf_event_kind {
  GF_EV_ALLOC = 1,   /* memory handed out: addr, size */
  GF_EV_FREE = 2,    /* memory given back: addr */
  GF_EV_MAP = 3,     /* cuMemMap succeeded: virtual range backed (addr, size, arg0=handle) */
  GF_EV_UNMAP = 4,   /* cuMemUnmap (addr, size) */
  GF_EV_LIB_MAPPED = 5, /* a watched library was mmapped with PROT_EXEC */
  GF_EV_EXEC = 6,    /* a watched process exec()ed */
  GF_EV_EXIT = 7,    /* a watched process exited: its last thread (pid/tid: that thread), or,
                      * where the exit tracepoint lacks group_dead, its leader */
  GF_EV_PY_FINALIZE = 8, /* Py_FinalizeEx entered: last chance to read code objects */
  GF_EV_CALL_STACK = 9,  /* stacks at the entry of an allocation call; its ALLOC
                          * (GF_EVF_STACK_AT_ENTRY) follows on the same thread */
  GF_EV_CPU_SAMPLE = 10, /* a profiled thread was on CPU at a sampling tick */
  GF_EV_KERNEL_LAUNCH = 11, /* a sampled kernel launch: arg0 = CUPTI correlation ID,
                             * arg1 = the API (GF_LAUNCH_API), with the launching stack;
                             * from a thread that runs no Python (autograd's engine
                             * threads) while backward() runs: arg2 = the backward
                             * caller's stack ID (a GF_EV_PY_STACK of the process's
                             * tensor batches) if exactly one call is active, else
                             * 0 and size = the number of active calls (0: none) */
  GF_EV_KERNEL_BATCH = 12,  /* size = n gf_kernel_record follow (GPU activity) */
  GF_EV_KERNEL_NAME = 13,   /* arg0 = name ID; a NUL-terminated name follows */
  GF_EV_CUPTI_STATUS = 14,  /* arg0 = enum gf_cupti_status, arg1 = the library's
                             * GF_ABI_VERSION (0: unversioned); at start, then
                             * (active) every flush period while traced */
  /* In-process tensor events (inprocess/, GF_EV_TENSOR_BATCH below): */
  GF_EV_TENSOR_BATCH = 15,  /* size = payload bytes: whole inner records follow */
  GF_EV_PY_STACK = 16,      /* inner: arg0 = stack ID; py_count gf_py_frame follow */
  GF_EV_TENSOR_HOOK = 17,   /* inner: arg0 = enum gf_tensor_hook; arg1 = while live, 0 or the
                             * reason there are no Python frames; arg2 = GF_ABI_VERSION */
  GF_EV_AUTOGRAD_HOOK = 18, /* inner: arg0 = enum gf_autograd_hook (the backward-origin hook) */
  GF_EV_LIB_COST = 19,      /* gpuflame:lib_cost: what libgpuflame_cupti.so has cost its
                             * process so far, cumulative, once a flush period while
                             * traced: addr = allocator hook calls, size = their ns,
                             * arg0 = ns in our CUPTI callbacks, arg1 = ns of the library's
                             * own threads (flusher CPU time, buffer conversion, switching
                             * CUPTI), arg2 = ns of CUPTI's OVERHEAD records. Hook and
                             * callback times: one call in 64 timed, scaled. */
  /* Out of memory (profiler/forensics/): */
  GF_EV_ALLOC_FAILED = 20,  /* a device-level allocation call returned out of memory
                             * (GF_CUDA_OUT_OF_MEMORY): once per call the application made
                             * (a driver call inside a runtime call is the runtime call's),
                             * api = that call, size = the bytes asked for (cuMemMap: to map;
                             * 0: not known, cuMemAllocPitch_v2), arg0 = the error code; its stack as an
                             * allocation's would be (GF_EVF_STACK_AT_ENTRY: the one sent at
                             * the call's entry). Emitted on the failure branch only. */
  GF_EV_OOM_REPORT = 21,    /* PyTorch's caching allocator gave up and is about to throw
                             * OutOfMemoryError: c10::reportOutOfMemoryToProfiler(alloc_size,
                             * total_allocated, total_reserved, device) (GF_TORCH_OOM_SYMBOL).
                             * size = alloc_size (the block it wanted, rounded), arg0 = the
                             * device index, arg1/arg2 = its allocated/reserved totals then
                             * (after freeing its cache); domain torch, with the calling
                             * thread's stack. A uprobe (the probes' path) or, in-process, an
                             * inner record of a tensor batch with GF_EVF_STACK_REF. */
  /* NCCL calls (bpf/nccl_calls.bpf.h, profiler/collectives/), domain NCCL,
   * api = the call (GF_API_NCCL_*). Additive: no record above changed. */
  GF_EV_NCCL_CALL = 22,     /* an NCCL API entered, with the calling thread's stack as an
                             * allocation's. addr = its communicator (ncclComm_t; 0 where the
                             * call takes none), size = count in elements (collectives,
                             * send/recv; init: nranks), arg0 = datatype | reduction op << 32
                             * (GF_NCCL_NO_OP in either half where there is none), arg1 =
                             * peer (send/recv), root (broadcast) or rank (init) as a signed
                             * 32-bit value (GF_NCCL_NO_PEER: none), arg2 = the CUDA stream.
                             * Init calls, whose communicator exists only at return: addr /
                             * arg2 = the hash (hi / lo, GF_NCCL_ID_HASH below) of the
                             * ncclUniqueId passed, the key that joins the ranks of one
                             * communicator (0 / 0: unreadable, GF_STAT_NCCL_ID_UNREADABLE) */
  GF_EV_NCCL_DONE = 23,     /* that call returned, on the same thread (header only): arg0 =
                             * ncclResult_t; init calls: addr = the communicator it wrote
                             * (0: failed or unreadable) */
  /* CUDA synchronise calls (bpf/cuda_sync.bpf.h, profiler/utilization/),
   * domain SYNC, api = the call (GF_API_IS_CUDA_SYNC). Additive. */
  GF_EV_CUDA_SYNC = 24,     /* a CPU thread returned from a synchronise call (the outermost,
                             * when a runtime call nests the driver's), sent at return with
                             * the calling thread's stack as an allocation's: ts_ns = when it
                             * returned, arg0 = when it was entered (both CLOCK_MONOTONIC),
                             * addr = the stream or event waited for (0: the whole device or
                             * context), arg1 = the cudaError_t / CUresult returned */
  GF_EV_CUDA_SYNC_ENTER = 25, /* a CPU thread entered a synchronise call (the outermost) in a
                             * process that has issued NCCL collectives or sends/receives
                             * (bpf/cuda_sync.bpf.h), sent at entry with the thread's stack:
                             * on a GPU a collective returns once enqueued, and a peer that
                             * never joins shows as this wait never returning (a GPU-side
                             * hang, profiler/collectives/). addr = the stream or event (0:
                             * device or context). Its return is the thread's next
                             * GF_EV_CUDA_SYNC. Additive. */
  GF_EV_THREAD_ENDED = 26,  /* a thread ended inside a probed NCCL or synchronise call while
                             * its process lives on (pthread_exit, a cancelled thread), from
                             * watch_exit (header only; pid/tid: the thread): arg0 =
                             * GF_ENDED_* bits, the calls it was in, which no return will
                             * close. A process's exit (a kill, exit_group) sends none: its
                             * GF_EV_EXIT ends them all. Additive. */
  GF_EV_IO = 27,            /* a model-loading syscall returned (bpf/io_calls.bpf.h; only with
                             * the timeline): api = enum gf_io_call, domain GF_DOMAIN_IO,
                             * arg2 = CLOCK_MONOTONIC at entry, ts_ns at exit, arg0 = the
                             * return value (a negative errno as a signed 64-bit value),
                             * addr = the fd (openat: its dirfd), size = bytes (read,
                             * pread64: the return value; mmap: the length asked), arg1 =
                             * openat: flags, pread64/mmap: offset, ioctl: request. A
                             * NUL-terminated name follows (at most GF_IO_NAME_MAX bytes
                             * with its NUL): openat's path as the process passed it, mmap's
                             * and ioctl's file name (the dentry's, no directory); read's
                             * none (an empty name). GF_EVF_IO_NAME_TRUNCATED: cut at
                             * GF_IO_NAME_MAX - 1 bytes. No stack: a walk per read costs more
                             * than the record. Additive. */
  GF_EV_API_BATCH = 28,     /* size = n gf_api_record follow: CUDA API calls the library saw
                             * enter and return (gpuflame:api_batch; only while an agent
                             * attaches it: record --timeline); arg0 = the records the
                             * library could not keep so far (its buffer was full),
                             * cumulative. Additive. */
  GF_EV_FORKED = 29,        /* a followed process's child returned from fork() or clone() as
                             * a process of its own (not a thread, not sharing its parent's
                             * memory: vfork and posix_spawn children run on their parent's
                             * probes until they exec), sent by the child itself before its
                             * first instruction (header only): arg0 = its parent's tgid.
                             * Only where probes are attached per process (record,
                             * follow_forks): a child inherits its parent's breakpoints but
                             * not their listeners. Gated (GF_EVF_GATED) when its parent
                             * was: it waits for its own probes. Additive. */
  GF_EV_TENSOR_TOTALS = 30, /* inner (GF_EV_TENSOR_BATCH): the caching allocator's totals
                             * after its latest event, which was not sent (a sampled run
                             * sends only the allocations it takes and their frees):
                             * arg0 = device, arg1 = allocated, arg2 = reserved, as an
                             * event's. Sent by the library's flusher, and before an
                             * event on another device. Additive (an agent from before
                             * it counts it as malformed and reads on). */
  /* The launch route (below, "Launch stacks without CUPTI's callbacks"). Additive. */
  GF_EV_LAUNCH_RECORDS = 31, /* size = n gf_api_record follow: the driver's launch, copy
                             * and memset calls (GF_LAUNCH_ROUTE_ENTRIES), as CUPTI's
                             * API activity records of them (gpuflame:
                             * launch_records), tid = the calling thread as its own PID
                             * namespace numbers it; arg0 = records the library could not
                             * convert so far (CUPTI's threadId unknown), cumulative */
  GF_EV_LAUNCH_WINDOW = 32, /* gpuflame:launch_window(open): arg0 = 1, the library's launch
                             * records are on from ts_ns; 0, off from ts_ns (the window's
                             * records come at its next flush). Header only */
};

/* gpuflame:launch's second argument, GF_EV_KERNEL_LAUNCH's arg1: the CUPTI
 * callback the launch's stack was taken in, its ID (cupti_driver_cbid.h,
 * cupti_runtime_cbid.h) in the low 16 bits and its domain (1: driver, 2:
 * runtime) above them. The agent names a launch's leaf from it where the
 * frame there is CUDA's and has no symbol: a runtime linked statically into
 * another library (cuDNN's) reaches the driver, and CUPTI, through entry
 * points libcuda does not export. A library from before the domain was
 * sent gives 0 there: the leaf stays as unwound. */
#define GF_LAUNCH_API(domain, cbid) ((((gf_u32)(domain)) & 0xffu) << 16 | (((gf_u32)(cbid)) & 0xffffu))
#define GF_LAUNCH_API_DOMAIN(api) ((gf_u8)(((api) >> 16) & 0xffu))
#define GF_LAUNCH_API_CBID(api) ((gf_u16)((api) & 0xffffu))

/* GF_EV_IO's api. */
enum gf_io_call {
  GF_IO_OPENAT = 1,
  GF_IO_READ = 2,
  GF_IO_PREAD64 = 3,
  GF_IO_MMAP = 4,  /* file mappings only: MAP_ANONYMOUS or fd -1 are not I/O */
  GF_IO_IOCTL = 5, /* on a GPU device file only (/dev/nvidia*) */
};
#define GF_IO_NAME_MAX 256

/* GF_EV_THREAD_ENDED arg0: the calls in flight when the thread ended. */
#define GF_ENDED_NCCL_CALL 1u
#define GF_ENDED_SYNC_CALL 2u

/* cudaErrorMemoryAllocation (runtime) and CUDA_ERROR_OUT_OF_MEMORY (driver):
 * the same value (driver_types.h and cuda.h of CUDA 13.0). */
#define GF_CUDA_OUT_OF_MEMORY 2

/* c10::reportOutOfMemoryToProfiler(int64_t alloc_size, size_t
 * total_allocated, size_t total_reserved, c10::Device), exported by
 * libc10.so (c10/core/Allocator.cpp) and called by the CUDA caching
 * allocator (libc10_cuda.so, through its GOT) only when it is about to
 * throw OutOfMemoryError, after freeing its cache and retrying. A version
 * of the source declares alloc_size size_t: the same registers, another
 * mangled name, so both are looked for. */
#define GF_TORCH_OOM_SYMBOL "_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE"
#define GF_TORCH_OOM_SYMBOL_UNSIGNED "_ZN3c1027reportOutOfMemoryToProfilerEmmmNS_6DeviceE"

/* Which accounting an event belongs to. */
enum gf_domain {
  GF_DOMAIN_NONE = 0,
  GF_DOMAIN_GPU = 1,   /* device level: what the CUDA driver/runtime handed out */
  GF_DOMAIN_TORCH = 2, /* tensor level: PyTorch caching-allocator blocks */
  GF_DOMAIN_CPU = 3,   /* CPU-time samples */
  GF_DOMAIN_LAUNCH = 4, /* kernel-launch stacks (the kernel name is added in user space) */
  GF_DOMAIN_NCCL = 5,   /* NCCL call stacks (GF_EV_NCCL_CALL) */
  GF_DOMAIN_SYNC = 6,   /* CUDA synchronise waits (GF_EV_CUDA_SYNC) */
  GF_DOMAIN_IO = 7,     /* model-loading syscalls (GF_EV_IO) */
};

/*
 * The API the application called: the leaf frame of every stack. It is passed
 * to BPF as the attach cookie, so one program serves every function of the same
 * shape.
 */
enum gf_api {
  GF_API_NONE = 0,
  /* CUDA runtime (libcudart) */
  GF_API_CUDA_MALLOC = 1,
  GF_API_CUDA_FREE,
  GF_API_CUDA_MALLOC_ASYNC,
  GF_API_CUDA_FREE_ASYNC,
  GF_API_CUDA_MALLOC_MANAGED,
  /* CUDA driver (libcuda) */
  GF_API_CU_MEM_ALLOC = 16,
  GF_API_CU_MEM_FREE,
  GF_API_CU_MEM_ALLOC_ASYNC,
  GF_API_CU_MEM_FREE_ASYNC,
  GF_API_CU_MEM_ALLOC_MANAGED,
  GF_API_CU_MEM_ALLOC_PITCH,
  GF_API_CU_MEM_CREATE,
  GF_API_CU_MEM_RELEASE,
  GF_API_CU_MEM_MAP,
  GF_API_CU_MEM_UNMAP,
  /* PyTorch caching allocator */
  GF_API_TORCH_MALLOC = 32, /* USDT pytorch:malloc */
  GF_API_TORCH_FREE,        /* USDT pytorch:free */
  GF_API_TORCH_REPORT,      /* uprobe c10::reportMemoryUsageToProfiler */
  /* NCCL (libnccl.so*, src/nccl.h.in of NCCL 2.30.7; the same in 2.28.9) */
  GF_API_NCCL_ALL_REDUCE = 40, /* (sendbuff, recvbuff, count, datatype, op, comm, stream) */
  GF_API_NCCL_BROADCAST,       /* (sendbuff, recvbuff, count, datatype, int root, comm, stream) */
  GF_API_NCCL_ALL_GATHER,      /* (sendbuff, recvbuff, sendcount, datatype, comm, stream) */
  GF_API_NCCL_REDUCE_SCATTER,  /* (sendbuff, recvbuff, recvcount, datatype, op, comm, stream) */
  GF_API_NCCL_SEND,            /* (sendbuff, count, datatype, int peer, comm, stream) */
  GF_API_NCCL_RECV,            /* (recvbuff, count, datatype, int peer, comm, stream) */
  GF_API_NCCL_GROUP_START,     /* () */
  GF_API_NCCL_GROUP_END,       /* () */
  GF_API_NCCL_COMM_INIT_RANK,  /* (ncclComm_t* comm, int nranks, ncclUniqueId commId (128 bytes, by value), int rank) */
  GF_API_NCCL_COMM_INIT_RANK_CONFIG, /* (..., int rank, ncclConfig_t* config) */
  GF_API_NCCL_COMM_DESTROY,    /* (comm) */
  GF_API_NCCL_COMM_ABORT,      /* (comm) */
  GF_API_NCCL_GET_UNIQUE_ID,   /* (ncclUniqueId* out) */
  /* CUDA synchronise calls (cuda_runtime_api.h, cuda.h of CUDA 13.0; the
   * per-thread-stream _ptsz names and cuCtxSynchronize_v2 share an ID).
   * cudaStreamWaitEvent is no CPU wait: not probed. */
  GF_API_CUDA_STREAM_SYNC = 56, /* cudaStreamSynchronize(stream) */
  GF_API_CUDA_DEVICE_SYNC,      /* cudaDeviceSynchronize() */
  GF_API_CUDA_EVENT_SYNC,       /* cudaEventSynchronize(event) */
  GF_API_CU_STREAM_SYNC,        /* cuStreamSynchronize(hStream) */
  GF_API_CU_CTX_SYNC,           /* cuCtxSynchronize(), cuCtxSynchronize_v2(ctx): no stream */
  GF_API_CU_EVENT_SYNC,         /* cuEventSynchronize(hEvent) */
  GF_API_MAX = 64,
};

#define GF_API_IS_NCCL(a) ((a) >= GF_API_NCCL_ALL_REDUCE && (a) <= GF_API_NCCL_GET_UNIQUE_ID)
#define GF_API_IS_CUDA_SYNC(a) ((a) >= GF_API_CUDA_STREAM_SYNC && (a) <= GF_API_CU_EVENT_SYNC)
#define GF_API_IS_NCCL_INIT(a) ((a) == GF_API_NCCL_COMM_INIT_RANK || (a) == GF_API_NCCL_COMM_INIT_RANK_CONFIG)
/* GF_EV_NCCL_CALL arg0's op half where the call takes no reduction op, and arg1 where it names no peer. */
#define GF_NCCL_NO_OP 0xffffffffu
#define GF_NCCL_NO_PEER (-1)
/* ncclUniqueId is 128 opaque bytes (NCCL_UNIQUE_ID_BYTES). GF_NCCL_ID_HASH:
 * FNV-1a over its 16 little-endian words, lo from the FNV offset basis, hi
 * from that basis xor GF_NCCL_ID_HASH_HI_SEED; user space tests compute the
 * same from the bytes the workload printed. */
#define GF_NCCL_UNIQUE_ID_BYTES 128
#define GF_NCCL_FNV_BASIS 0xcbf29ce484222325ull
#define GF_NCCL_FNV_PRIME 0x100000001b3ull
#define GF_NCCL_ID_HASH_HI_SEED 0x9e3779b97f4a7c15ull

#define GF_API_IS_RUNTIME(a) ((a) >= GF_API_CUDA_MALLOC && (a) < GF_API_CU_MEM_ALLOC)
#define GF_API_IS_DRIVER(a) ((a) >= GF_API_CU_MEM_ALLOC && (a) < GF_API_TORCH_MALLOC)

/* gf_event.flags */
enum gf_event_flags {
  GF_EVF_FORWARDED = 1u << 0,  /* driver event inside a runtime call: api is the runtime's */
  GF_EVF_HANDLE = 1u << 1,     /* addr is a cuMemCreate handle, not a pointer */
  GF_EVF_PY_TRUNCATED = 1u << 2, /* more Python frames than GF_MAX_PY_FRAMES */
  GF_EVF_PY_NO_THREAD = 1u << 3, /* Python process, thread has no PyThreadState */
  GF_EVF_PY_READ_FAILED = 1u << 4, /* a read of interpreter memory failed mid-walk */
  GF_EVF_PY_KEY_UNSET = 1u << 5, /* interpreter not initialised yet */
  GF_EVF_GATED = 1u << 6,      /* the process was stopped; user space must SIGCONT it */
  GF_EVF_NATIVE_TRUNCATED = 1u << 7,
  GF_EVF_USER_STACK = 1u << 8,  /* regs + copied stack follow (fixed layout) */
  GF_EVF_STACK_AT_ENTRY = 1u << 9, /* the stack is this thread's last GF_EV_CALL_STACK */
  GF_EVF_STACK_REF = 1u << 10, /* inner record: one u64 stack ID (a GF_EV_PY_STACK) follows */
  /* Inner tensor record made on a thread that runs no Python (autograd's
   * engine threads) while a backward() call ran: the stack ID names the
   * stack of the thread that called it; user space adds <autograd engine>. */
  GF_EVF_AUTOGRAD = 1u << 11,
  /* With GF_EVF_AUTOGRAD: several backward() calls were running, so whose
   * work this is cannot be told; the u64 that follows is their count. */
  GF_EVF_AUTOGRAD_AMBIGUOUS = 1u << 12,
  /* In-process GF_EV_ALLOC taken by sampling (below): after the stack ID,
   * a second u64 says how many bytes it stands for. A probe's tensor-level
   * GF_EV_ALLOC taken by sampling stands for max(size,
   * GF_PROBE_TENSOR_SAMPLE_BYTES); its GF_EV_FREE sent while sampling may
   * be of a block never taken. */
  GF_EVF_SAMPLED = 1u << 13,
  /* A probe's record from a thread that runs no Python while backward()
   * runs in its process (bpf/lib/backward_callers.bpf.h): its Python frames
   * are those of the thread blocked in Engine::execute, not its own; native
   * frames, if any, are its own. With GF_EVF_AUTOGRAD_AMBIGUOUS there are no
   * Python frames and gf_event.backward_calls says how many calls ran. */
  GF_EVF_BACKWARD_CALLER = 1u << 14,
  /* The Python frames are known (struct gf_stack_id below): in their place,
   * the 16-byte ID of the GF_EVF_STACK_NEW record that carried them. */
  GF_EVF_STACK_ID = 1u << 15,
  /* The py_count frames are followed by their 16-byte ID, which later
   * records of this process may send instead (GF_EVF_STACK_ID). */
  GF_EVF_STACK_NEW = 1u << 16,
  /* GF_EV_IO: its name was longer than GF_IO_NAME_MAX - 1 bytes (or exactly
   * that long: the kernel's copy cannot tell) and is cut there. */
  GF_EVF_IO_NAME_TRUNCATED = 1u << 17,
  /* GF_EV_KERNEL_LAUNCH taken by a uprobe at one of libcuda's exported launch
   * entry points (the launch route): arg0 = 0 (no correlation ID yet), arg1 =
   * GF_LAUNCH_API(1, that entry's CUPTI callback ID), addr = the thread's ID
   * in its own PID namespace (what CUPTI's records call it) */
  GF_EVF_LAUNCH_HIT = 1u << 18,
};

struct gf_event {
  gf_u8 kind;   /* enum gf_event_kind */
  gf_u8 domain; /* enum gf_domain */
  gf_u16 api;   /* enum gf_api */
  gf_u32 flags; /* enum gf_event_flags */
  gf_u32 pid;   /* host thread-group id */
  gf_u32 tid;   /* host thread id */
  gf_u64 ts_ns; /* CLOCK_MONOTONIC */
  gf_u64 addr;  /* device pointer or handle */
  gf_u64 size;  /* bytes */
  gf_u64 arg0;  /* device (torch), handle (map), inode (lib mapped) */
  gf_u64 arg1;  /* allocator's total allocated bytes (report hook) / dev */
  gf_u64 arg2;  /* allocator's total reserved bytes (report hook) */
  gf_u16 py_count;
  gf_u16 native_count;
  gf_u16 user_stack_len; /* GF_EVF_USER_STACK: bytes of stack copied from sp */
  gf_u16 backward_calls; /* GF_EVF_BACKWARD_CALLER | GF_EVF_AUTOGRAD_AMBIGUOUS: how many ran; else 0 */
};
GF_STATIC_ASSERT(sizeof(struct gf_event) == 72, "gf_event ABI");

/*
 * With GF_EVF_USER_STACK (GF_EV_CALL_STACK records taken at the entry of a
 * device-level call, where no return probe has yet replaced a return address
 * with the kernel's uretprobe trampoline; or every ALLOC with native_stacks=2)
 * the record has a fixed layout, for DWARF unwinding in user space:
 *
 *   | gf_event | GF_MAX_PY_FRAMES x gf_py_frame (py_count valid) |
 *   | gf_user_regs | GF_USER_STACK_BYTES of stack (user_stack_len valid) |
 */
#define GF_USER_STACK_BYTES 16384

struct gf_user_regs {
  gf_u64 ip;
  gf_u64 sp;
  gf_u64 bp;
};
GF_STATIC_ASSERT(sizeof(struct gf_user_regs) == 24, "gf_user_regs ABI");

/* gf_py_frame.flags */
enum gf_py_frame_flags {
  GF_PYF_TRAMPOLINE = 1u << 0, /* a C-stack entry (shim) frame: <interpreter trampoline> */
  GF_PYF_FIRST_LINE = 1u << 1, /* first_line holds co_firstlineno (low 16 bits) read at the event */
};

/* One Python frame as the interpreter had it; names are read later. */
struct gf_py_frame {
  gf_u64 code;  /* PyCodeObject* (0 for a 3.13 shim frame) */
  gf_u64 aux;   /* 3.10 only: the type of `self` / the class `cls` (PyTypeObject*) */
  gf_u32 instr; /* instruction index in code units (for the line number) */
  gf_u16 first_line; /* GF_PYF_FIRST_LINE: co_firstlineno & 0xffff at the event */
  gf_u8 flags;
  gf_u8 pad;
};
GF_STATIC_ASSERT(sizeof(struct gf_py_frame) == 24, "gf_py_frame ABI");

/*
 * Per-process interpreter layout, written by user space at discovery and read
 * by the walker at every event. Offsets in bytes, from the per-version
 * tables in inspect/python_layout.cc (where each comes from is said there).
 */
struct gf_py_proc {
  gf_u64 runtime_addr;       /* &_PyRuntime in the process */
  gf_u64 none_addr;          /* &_Py_NoneStruct (3.13 shim frames) */
  gf_u32 version;            /* 0x030C for 3.12 */
  gf_u32 tss_off;            /* offset of the autoTSSkey Py_tss_t in _PyRuntime */
  gf_u32 pthread_specific_off; /* glibc struct pthread.specific_1stblock */
  gf_u16 tstate_frame;       /* tstate -> frame / cframe / current_frame */
  gf_u16 cframe_current;     /* cframe -> current_frame (3.11/3.12) */
  gf_u16 frame_code;
  gf_u16 frame_back;
  gf_u16 frame_instr;
  gf_u16 frame_owner;        /* 3.12+: owner byte; 0 = none */
  gf_u16 frame_is_entry;     /* 3.11: is_entry byte; 0 = none */
  gf_u16 frame_localsplus;
  gf_u16 code_adaptive;      /* offset of co_code_adaptive (3.11+) */
  gf_u16 code_firstlineno;
  gf_u8 uses_cframe;
  gf_u8 instr_is_pointer;    /* 3.11+: prev_instr/instr_ptr; 3.10: int f_lasti */
  gf_u8 read_self_type;      /* 3.10: read type(localsplus[0]) for Class > method */
  gf_u8 pad0;
  gf_u16 frame_read_len;     /* bytes of a frame holding every field above (<= 128) */
  gf_u16 tstate_datastack;   /* 3.11+: tstate->datastack_chunk (datastack_top follows); 0 = none */
  /* Written by BPF, 0 from user space: CPython's autoTSSkey + 1 once read
   * initialized. The key is fixed from Py_Initialize to Py_FinalizeEx (whose
   * probe clears this), so each event is spared one read of _PyRuntime. */
  gf_u32 tss_key_plus1;
  /* Written by user space, new at every write of this entry: seeds the
   * process's stack IDs (struct gf_stack_id), so a reused pid or a new
   * image never matches an ID user space knows for another. */
  gf_u32 generation;
};
GF_STATIC_ASSERT(sizeof(struct gf_py_proc) == 64, "gf_py_proc ABI");

/*
 * Stacks interned in the kernel. Most events of a training step repeat a
 * few hundred Python stacks; each record carried its frames whole (about
 * 1 KB for PyTorch's 40-deep stacks). Now the first record of a stack on
 * each CPU carries its frames and an ID (GF_EVF_STACK_NEW), later ones only
 * the ID (GF_EVF_STACK_ID: 88 bytes).
 *
 * The ID is a 128-bit hash of the frames, seeded with the process's
 * gf_py_proc.generation (bpf/lib/stack_hash.bpf.h). Each CPU remembers the
 * IDs it has sent (bpf/lib/stack_ids.bpf.h) and sends an ID alone only
 * after its own record with the frames went into the ring; records leave
 * the ring in the order they entered, so user space always holds an ID's
 * frames before the first record that names it. User space keeps the
 * frames per process until its exit or exec (profiler/pipeline/stack_ids.h).
 */
struct gf_stack_id {
  gf_u64 lo;
  gf_u64 hi;
};
GF_STATIC_ASSERT(sizeof(struct gf_stack_id) == 16, "gf_stack_id ABI");

/*
 * Benchmarks only (bench/overhead_harness.cc, modes stage-1 ... stage-8):
 * the allocation path returns after stage N, so that the kernel's
 * per-program run time splits an event's cost into its parts. A probe whose
 * hits are half frees (c10::reportMemoryUsageToProfiler) emits its frees
 * whole from stage 2 on, before any allocation goes past its entry, so that
 * no later stage's increase mixes the two. Outside the benchmark the knob
 * (bench_stop_at, rodata) is 0 and the verifier prunes every test of it.
 */
enum gf_bench_stage {
  GF_STAGE_ENTRY = 1,  /* the program ran and found its target */
  GF_STAGE_FREE = 2,   /* frees emitted in full; allocations still stop at their entry */
  GF_STAGE_HEADER = 3, /* the record's header filled, the process's Python layout found */
  GF_STAGE_TSTATE = 4, /* the calling thread's PyThreadState found */
  GF_STAGE_THREAD = 5, /* its innermost frame and data-stack bounds read */
  GF_STAGE_WINDOW = 6, /* the top of its data stack copied */
  GF_STAGE_WALK = 7,   /* its frames walked, nothing emitted */
  GF_STAGE_INTERN = 8, /* its stack's ID finished and looked up (struct gf_stack_id), nothing emitted;
                        * past stage 7 also the backward() caller's stack walked for a thread without Python */
};

/* targets map value */
enum gf_target_flags {
  GF_TARGET_TRACE = 1u << 0,   /* take this process's events */
  GF_TARGET_GATE = 1u << 1,    /* stop it when a watched library maps, until attached */
  GF_TARGET_FOLLOW = 1u << 2,  /* children inherit the target flags */
  GF_TARGET_SAMPLE = 1u << 3,  /* sample its CPU time (machine-wide mode) */
};

/* covered_files map key: a library file gpuflame has attached its probes to
 * (or decided not to). In machine-wide mode with the gate on, the first
 * process to map a watched file that is not covered is stopped until user
 * space has attached (bpf/process_lifecycle.bpf.h); later ones never wait. */
struct gf_file_key {
  gf_u64 ino;
  gf_u64 dev; /* the superblock's s_dev, as the kernel encodes it */
};
GF_STATIC_ASSERT(sizeof(struct gf_file_key) == 16, "gf_file_key ABI");

/*
 * `held` map (bpf/process_lifecycle.bpf.h): the processes a gate stopped
 * and nothing has resumed since, keyed by tgid. gpuflame's guardian
 * (profiler/process/guardian.h) holds a descriptor of this map, so that if
 * gpuflame is killed it can resume every process held here, including ones
 * user space never heard of (the machine-wide gate stops them before their
 * record is read). An entry is reserved before the SIGSTOP is sent (no room
 * means no stop: GF_STAT_GATE_UNHELD), stamped once it is sent, and deleted
 * in the kernel by any SIGCONT that reaches the process after that (the
 * signal_generate tracepoint) and by its exit: a process that someone else
 * stops later is not in the map. User space only reads it.
 */
#define GF_HELD_MAX 4096
struct gf_held {
  gf_u64 start_ns; /* the leader's start_boottime: /proc/PID/stat's starttime, in ns (a reused pid differs) */
  gf_u64 stop_ns;  /* bpf_ktime_get_ns() once the SIGSTOP is sent, 0 before: names this stop */
};
GF_STATIC_ASSERT(sizeof(struct gf_held) == 16, "gf_held ABI");

/*
 * Records the ring buffer had no room for (GF_STAT_RINGBUF_FULL), charged to
 * their process so the loss shows where the user looks: user space puts them
 * under a "[lost: ring buffer full]" frame in that process's profiles.
 *
 * `losses`: per (process, domain, kind), how many records and, for
 * allocations, how many bytes were lost (cumulative; user space reads the
 * growth). Domain and kind are the lost record's gf_event fields.
 */
struct gf_loss_key {
  gf_u32 pid;
  gf_u8 domain; /* enum gf_domain */
  gf_u8 kind;   /* enum gf_event_kind */
  gf_u16 pad;
};
GF_STATIC_ASSERT(sizeof(struct gf_loss_key) == 8, "gf_loss_key ABI");

struct gf_loss {
  gf_u64 records;
  gf_u64 bytes;   /* GF_EV_ALLOC: what they stood for (a probe-sampled one: the interval) */
  gf_u64 objects; /* GF_EV_ALLOC: likewise, in allocations (a probe-sampled one: about
                   * the interval over its size, gf_lost_event) */
};
GF_STATIC_ASSERT(sizeof(struct gf_loss) == 24, "gf_loss ABI");

/*
 * `lost_events` (LRU): each lost GPU or tensor GF_EV_ALLOC / GF_EV_FREE
 * itself, without its stack, so in-use bytes stay exact: user space makes a
 * lost allocation live under the [lost] frame (its free matches it), and
 * applies a lost free to the allocation it frees. Taken out by user space
 * as it reads them; what the LRU evicts first is only in `losses`. The time
 * is in the key: an allocator that reuses an address at once (PyTorch's
 * caching allocator does) loses several events on it between two reads.
 */
struct gf_lost_key {
  gf_u64 addr;
  gf_u64 ts_ns;
  gf_u32 pid;
  gf_u8 domain;
  gf_u8 kind;
  gf_u8 handle;  /* GF_EVF_HANDLE */
  gf_u8 sampled; /* GF_EVF_SAMPLED: a free of a block the probes may never have taken */
};
GF_STATIC_ASSERT(sizeof(struct gf_lost_key) == 24, "gf_lost_key ABI");

struct gf_lost_event {
  gf_u64 ts_ns;
  gf_u64 size; /* GF_EV_ALLOC: the bytes it stands for */
  /* GF_EV_ALLOC: the allocations it stands for: 1, or for a probe-sampled
   * one the interval over its own size, rounded up with probability equal
   * to the fraction (unbiased, as user space counts a sampled allocation
   * that arrived) */
  gf_u64 objects;
};
GF_STATIC_ASSERT(sizeof(struct gf_lost_event) == 24, "gf_lost_event ABI");

/* Per-CPU counters, indices into the `stats` map. */
/*
 * Work gpuflame sheds when over its own CPU or memory budget
 * (profiler/pipeline/guardrails.h), set at run time in the BPF object's
 * `shed` global (bpf/lib/config.bpf.h). Each shed event is counted.
 */
enum gf_shed {
  GF_SHED_NATIVE_STACKS = 1u << 0, /* no user-stack copies: Python frames only */
  GF_SHED_CPU_SAMPLES = 1u << 1,   /* no CPU-time samples */
  GF_SHED_TENSOR_EVENTS = 1u << 2, /* no caching-allocator events */
  /* Bit 3 is user space's own (profiler/pipeline/guardrails.h). */
  GF_SHED_TENSOR_SAMPLED = 1u << 4, /* caching-allocator events through the probes sampled by
                                     * bytes (GF_PROBE_TENSOR_SAMPLE_BYTES, below) */
};

/*
 * The probes' sampling of tensor allocations, by configuration once a
 * process is past its start-up (tensor_sample_after_ns, bpf/lib/config.bpf.h:
 * the agent's default) or as the guardrails' rung before tensor events stop
 * (GF_SHED_TENSOR_SAMPLED): an allocation of fewer bytes than this is taken with
 * probability size / GF_PROBE_TENSOR_SAMPLE_BYTES and then stands for that
 * many bytes; a larger one is always taken and stands for itself. Either
 * way it carries GF_EVF_SAMPLED, and user space counts it as
 * max(size, GF_PROBE_TENSOR_SAMPLE_BYTES): on average its own bytes. Every
 * free still goes out, with GF_EVF_SAMPLED while sampling (its block may
 * not have been taken: user space counts such an unmatched free apart). The
 * in-process hook's default interval, so that both paths' estimates read
 * alike.
 */
#define GF_PROBE_TENSOR_SAMPLE_BYTES (4ull << 20)

enum gf_stat {
  GF_STAT_EVENTS = 0,
  GF_STAT_RINGBUF_FULL,
  GF_STAT_CTX_MISSING,       /* return probe without its entry (attached mid-call) */
  GF_STAT_OUT_READ_FAILED,   /* could not read the allocation's out-parameter */
  GF_STAT_FAILED_CALLS,      /* the CUDA call returned an error: nothing allocated */
  GF_STAT_PY_WALKS,
  GF_STAT_PY_NO_THREAD,
  GF_STAT_PY_READ_FAILED,
  GF_STAT_PY_TRUNCATED,
  GF_STAT_FORWARDED,         /* driver events attributed to an enclosing runtime call */
  GF_STAT_GATED,
  GF_STAT_CPU_SAMPLES,       /* ticks that landed in a profiled process */
  GF_STAT_LAUNCHES,          /* sampled kernel launches seen at the USDT probe */
  GF_STAT_KERNEL_RECORDS,    /* GPU activity records copied from the injection library */
  GF_STAT_KERNEL_BATCH_READ_FAILED, /* a batch the probe could not read (records lost) */
  GF_STAT_SHED_NATIVE_STACKS, /* events whose stack copy was shed (guardrails) */
  GF_STAT_SHED_CPU_SAMPLES,   /* ticks in profiled processes not taken (guardrails) */
  GF_STAT_SHED_TENSOR_EVENTS, /* caching-allocator events not taken (guardrails) */
  GF_STAT_TENSOR_BATCHES,     /* in-process tensor batches copied (gpuflame:tensor_batch) */
  GF_STAT_TENSOR_BATCH_READ_FAILED, /* a tensor batch the probe could not copy (events lost) */
  GF_STAT_BACKWARD_CALLS,     /* Engine::execute entries from Python recorded (bpf/autograd_origin.bpf.h) */
  GF_STAT_BACKWARD_UNTRACKED, /* ... not recorded: every slot of the process held a running call */
  GF_STAT_BACKWARD_LENT,      /* records of a thread without Python given its backward() caller's stack */
  GF_STAT_PRESSURE_NATIVE_STACKS, /* stack copies not taken: the ring was over half full (lib/config.bpf.h) */
  GF_STAT_GATE_UNHELD,        /* gates not applied: no room in `held` to record the stop (struct gf_held) */
  GF_STAT_STACK_IDS,          /* records that sent a known Python stack as its ID (struct gf_stack_id) */
  GF_STAT_STACK_NEW,          /* records that sent a Python stack's frames with its ID */
  GF_STAT_NCCL_CALLS,         /* NCCL API entries recorded (bpf/nccl_calls.bpf.h) */
  GF_STAT_NCCL_NESTED,        /* NCCL API entries inside another on the same thread: not recorded */
  GF_STAT_NCCL_ID_UNREADABLE, /* init calls whose ncclUniqueId could not be read (ranks not joined) */
  GF_STAT_CUDA_SYNCS,         /* CUDA synchronise calls recorded at return (bpf/cuda_sync.bpf.h) */
  GF_STAT_CUDA_SYNC_NESTED,   /* synchronise entries inside another on the same thread: not recorded */
  GF_STAT_CALLS_ENDED_WITH_THREAD, /* threads that ended inside a probed call (no return; watch_exit) */
  GF_STAT_CUDA_SYNC_ENTRIES,  /* synchronise entries sent at once (GF_EV_CUDA_SYNC_ENTER: NCCL processes) */
  GF_STAT_THREAD_ENDED_SENT,  /* GF_EV_THREAD_ENDED records sent (a thread ended in a call, its process lives on) */
  GF_STAT_IO_SPANS,           /* GF_EV_IO records sent (bpf/io_calls.bpf.h) */
  GF_STAT_IO_SMALL,           /* reads under both io_min_bytes and io_min_ns: not sent */
  GF_STAT_IO_OVER_CAP,        /* I/O calls of a process past io_max_per_process: not sent */
  GF_STAT_API_RECORDS,        /* CUDA API call records copied from the injection library (gpuflame:api_batch) */
  GF_STAT_API_BATCH_READ_FAILED, /* an API batch the probe could not read (records lost) */
  GF_STAT_TENSOR_NOT_SAMPLED, /* probes' caching-allocator allocations not taken while sampling (GF_PROBE_TENSOR_SAMPLE_BYTES) */
  GF_STAT_LAUNCH_HITS,        /* launch stacks taken at libcuda's launch entry points (the launch route) */
  GF_STAT_LAUNCH_RECORDS,     /* the driver's launch records copied from the library (gpuflame:launch_records) */
  GF_STAT_LAUNCH_RECORDS_READ_FAILED, /* a launch record batch the probe could not read (records lost) */
  GF_STAT_MAX,
};

/*
 * GPU activity, as libgpuflame_cupti.so (cupti/) hands it over at its USDT
 * probe gpuflame:kernel_batch(records, count): plain records, converted from
 * CUPTI's versioned activity structs in the process, copied by BPF unchanged.
 */
enum gf_gpu_activity_kind {
  GF_GPU_KERNEL = 1,
  GF_GPU_MEMCPY = 2,
  GF_GPU_MEMSET = 3,
  /* Not GPU work: a CPU thread of the process waited in a CUDA synchronise
   * call (start_ns..end_ns on CUPTI's clock, as the others); copy_kind =
   * enum gf_sync_kind, stream = the stream waited for (stream syncs), device
   * = GF_DEVICE_UNKNOWN (CUPTI's record names a context, not a device). */
  GF_GPU_SYNC = 4,
  /* Not GPU work: CUPTI activity was on from start_ns to end_ns (CUPTI's
   * clock, as the others), each record of it worth |weight|; device =
   * GF_DEVICE_UNKNOWN (every device of the process), the other fields 0.
   * Sent when the library switches activity off or changes its weight, and
   * for the still open span at every flush (then end_ns is the flush's
   * time, and a later record of the same span repeats start_ns with a
   * later end_ns: consumers take the union). Only work launched while
   * activity was on has records; that work may run past end_ns (a
   * launch-ahead queue), and work launched before start_ns may still run
   * after it without a record (utilization/windowed_lane.h says how both
   * are judged). */
  GF_GPU_ACTIVITY_WINDOW = 6,
  /* Not GPU work: which GPU the process's CUDA device |device| (its ordinal,
   * as in the work records) is: the driver's UUID of it (cuDeviceGetUuid_v2,
   * the 16 bytes of CUuuid in order), its first 8 bytes in start_ns and
   * its last 8 in end_ns, each as memcpy'd (byte order as in memory); the
   * other fields 0. NVML names the same GPU by the same bytes ("GPU-" and
   * them in hex, 8-4-4-4-12), whatever CUDA_VISIBLE_DEVICES renumbered.
   * Sent for every device of the process at each flush while an agent
   * listens (an agent may attach at any time), once the process has run
   * work on a GPU (the driver is initialised by then). Additive (the v5
   * rule): an older agent skips it. */
  GF_GPU_DEVICE = 7,
};
/* GPU work: kernels, copies, memsets (the kinds busy time is made of). */
#define GF_GPU_IS_WORK(kind) ((kind) >= GF_GPU_KERNEL && (kind) <= GF_GPU_MEMSET)

/* Which synchronise call a GF_GPU_SYNC record is (CUPTI's
 * CUpti_ActivitySynchronizationType values; stream-wait-event, a GPU-side
 * wait, is not sent: no CPU thread waits in it). */
enum gf_sync_kind {
  GF_SYNC_EVENT = 1,   /* cudaEventSynchronize */
  GF_SYNC_STREAM = 3,  /* cudaStreamSynchronize */
  GF_SYNC_CONTEXT = 4, /* cudaDeviceSynchronize, cuCtxSynchronize */
};
#define GF_DEVICE_UNKNOWN 0xffffffffu

struct gf_kernel_record {
  gf_u64 start_ns;    /* GPU timestamps, CUPTI's clock */
  gf_u64 end_ns;
  gf_u32 correlation; /* CUPTI correlation ID of the launching API call */
  gf_u32 name_id;     /* kernels: ID announced by gpuflame:kernel_name; else 0 */
  gf_u32 device;
  gf_u32 stream;
  gf_u32 graph_id;    /* CUDA graph the kernel ran in; 0 for a direct launch */
  gf_u8 kind;         /* enum gf_gpu_activity_kind */
  gf_u8 copy_kind;    /* memcpy: CUpti_ActivityMemcpyKind */
  gf_u16 weight;      /* how many records this one stands for: N when activity
                       * was on one period in N (duty-cycled, see
                       * gpuflame:kernel_time_exact below); 0 or 1: itself */
  gf_u64 bytes;       /* memcpy, memset: bytes moved or set; else 0 */
};
GF_STATIC_ASSERT(sizeof(struct gf_kernel_record) == 48, "gf_kernel_record ABI");

/*
 * A CUDA API call of the application's, entry to return, as the injection
 * library's CUPTI callbacks saw it (cupti/api_spans.h): kernel and graph
 * launches, memcpy and memset, device memory allocation, free, host
 * allocation and virtual-memory calls, runtime or driver, the outermost call
 * only (a runtime launch's driver launch inside it is the same call). A
 * memory call's bytes and stack are its eBPF allocation or free event's, on
 * the same thread within the call (the timeline joins them). Times are
 * CLOCK_MONOTONIC, read in the process: the BPF clock, so the timeline needs
 * no calibration for them. No stack: a sampled launch's stack comes at
 * gpuflame:launch with the same correlation ID, and every other call is
 * where its thread's samples say it was. Handed over at the USDT probe
 * gpuflame:api_batch(records, count, dropped) in runs of at most
 * GF_API_BATCH_MAX, and only while an agent attaches it: the callbacks
 * record nothing otherwise. Additive: an agent that does not attach the
 * probe never gets one.
 */
struct gf_api_record {
  gf_u64 start_ns;    /* CLOCK_MONOTONIC at the callback's entry */
  gf_u64 end_ns;      /* ... at its exit */
  gf_u32 correlation; /* CUPTI's: the GPU records of its work carry it */
  gf_u32 tid;         /* the calling thread (gettid) */
  gf_u16 cbid;        /* CUPTI's callback ID in |domain| */
  gf_u8 domain;       /* CUpti_CallbackDomain: 1 driver, 2 runtime */
  gf_u8 pad;
  gf_u32 result;      /* the call's return value (cudaError_t or CUresult) */
};
GF_STATIC_ASSERT(sizeof(struct gf_api_record) == 32, "gf_api_record ABI");
#define GF_API_BATCH_MAX 128

/*
 * Launch stacks without CUPTI's callbacks (the launch route). CUPTI's launch
 * callbacks, once enabled, cost every launch their dispatch for the life of
 * the process (switching them off while other threads launch crashes CUPTI:
 * tests/gpu/cupti_toggle.c), about 2% of a launch-bound step. Every launch,
 * the runtime's included, enters one of libcuda's exported launch entry
 * points, and CUPTI's API activity records of those calls can be switched at
 * will (an H100: tests/gpu/run_launch_route.sh, README, Measured, session
 * 36). So an agent that attaches gpuflame:launch_route() (a switch: only its
 * semaphore is read) takes launch stacks itself, by uprobes on those entry
 * points (GF_EVF_LAUNCH_HIT), attached to one process only while its
 * library's launch window is open, and the library, instead of enabling its
 * launch callbacks:
 *  - opens launch windows where it would enable the callbacks, saying so
 *    at gpuflame:launch_window(1) each tick, and closes them at
 *    gpuflame:launch_window(0);
 *  - while a window is open, has CUPTI record the driver's calls of
 *    GF_LAUNCH_ROUTE_ENTRIES (cuptiActivityEnableDriverApi, those call IDs
 *    alone: launches, copies and memsets) and hands them over
 *    at gpuflame:launch_records(records, count, unconverted) as gf_api_records
 *    (domain 1), their times converted to CLOCK_MONOTONIC at each flush, in
 *    runs of at most GF_API_BATCH_MAX.
 * CUPTI records none of these calls where their records were first switched
 * on after the process's start (an H100, session 38), and those on from the
 * start, then off, come again in every window (session 39). So the library
 * primes them: on from its start, inside cuInit, until the first record
 * comes, whether or not an agent listens. Where that failed (CUPTI refused
 * them, or none came with the first 1000 kernels recorded while an agent
 * listened), was turned off (GPUFLAME_LAUNCH_ROUTE_PRIME=0) or CUPTI was
 * detached since, stacks come by the callbacks. Records also come outside
 * windows: while priming, and for a tick after each close (the agent's
 * uprobes go a little after it); the agent counts those without a hit.
 * The agent joins each record to the hit on its thread just before it (CUPTI
 * starts a call's record a few microseconds after the entry point's first
 * instruction: 2.1-6.3 us, p1-p99, on an H100), which gives the hit's stack
 * the call's correlation ID, the one its kernel's (copy's, memset's) records
 * carry. Additive: an
 * agent that does not attach the switch gets the callbacks' stacks, and a
 * library without these probes gets no uprobes. The switch is the process's,
 * not an agent's: while one agent holds it, another that takes stacks from
 * the callbacks gets none.
 */

/*
 * The launch route's entry points: libcuda's exported functions that submit
 * GPU work, each with its CUPTI driver callback ID (cupti_driver_cbid.h) and
 * what it submits (Launch, GraphLaunch, Memcpy, Memset). The agent attaches
 * launch_entry to those a libcuda exports (older drivers lack some); the
 * library turns on the API records of exactly these IDs in a launch window,
 * and checks each ID against CUPTI's header when it is built. A copy's or a
 * memset's activity record carries the correlation ID of the driver call
 * that made it (CUPTI's CUpti_ActivityMemcpy6.correlationId), as a kernel's
 * does its launch's; the synchronous copies and memsets are here too
 * (PyTorch's pageable copies and .item() are such calls).
 */
#define GF_LAUNCH_ROUTE_ENTRIES(X)                                                                    \
  X(cuLaunchKernel, 307, Launch) X(cuLaunchKernel_ptsz, 442, Launch)                                 \
  X(cuLaunchCooperativeKernel, 477, Launch) X(cuLaunchCooperativeKernel_ptsz, 478, Launch)           \
  X(cuGraphLaunch, 514, GraphLaunch) X(cuGraphLaunch_ptsz, 515, GraphLaunch)                         \
  X(cuLaunchKernelEx, 652, Launch) X(cuLaunchKernelEx_ptsz, 653, Launch)                             \
  X(cuMemcpy, 305, Memcpy) X(cuMemcpy_ptds, 408, Memcpy)                                             \
  X(cuMemcpyAsync, 306, Memcpy) X(cuMemcpyAsync_ptsz, 418, Memcpy)                                   \
  X(cuMemcpyHtoD_v2, 276, Memcpy) X(cuMemcpyHtoD_v2_ptds, 397, Memcpy)                               \
  X(cuMemcpyDtoH_v2, 278, Memcpy) X(cuMemcpyDtoH_v2_ptds, 398, Memcpy)                               \
  X(cuMemcpyDtoD_v2, 280, Memcpy) X(cuMemcpyDtoD_v2_ptds, 399, Memcpy)                               \
  X(cuMemcpyHtoDAsync_v2, 277, Memcpy) X(cuMemcpyHtoDAsync_v2_ptsz, 421, Memcpy)                     \
  X(cuMemcpyDtoHAsync_v2, 279, Memcpy) X(cuMemcpyDtoHAsync_v2_ptsz, 422, Memcpy)                     \
  X(cuMemcpyDtoDAsync_v2, 281, Memcpy) X(cuMemcpyDtoDAsync_v2_ptsz, 423, Memcpy)                     \
  X(cuMemsetD8_v2, 249, Memset) X(cuMemsetD8_v2_ptds, 411, Memset)                                   \
  X(cuMemsetD16_v2, 250, Memset) X(cuMemsetD16_v2_ptds, 412, Memset)                                 \
  X(cuMemsetD32_v2, 251, Memset) X(cuMemsetD32_v2_ptds, 413, Memset)                                 \
  X(cuMemsetD8Async, 216, Memset) X(cuMemsetD8Async_ptsz, 428, Memset)                               \
  X(cuMemsetD16Async, 218, Memset) X(cuMemsetD16Async_ptsz, 429, Memset)                             \
  X(cuMemsetD32Async, 220, Memset) X(cuMemsetD32Async_ptsz, 430, Memset)

#define GF_KERNEL_BATCH_MAX 64   /* records per gpuflame:kernel_batch hit */
#define GF_KERNEL_NAME_MAX 1024  /* bytes of a kernel name, NUL included */

/*
 * gpuflame:kernel_time_exact(): never fired; an agent that attaches it raises
 * its semaphore, which tells the library to keep CUPTI activity on all the
 * time (`record`). With only the other probes attached (the agent's default)
 * the library duty-cycles activity: on for one period in N, at a random
 * phase, each record weighted N, so sums stay unbiased estimates. Launch
 * callbacks are duty-cycled in both modes (launch stacks are sampled anyway:
 * profiler/aggregate/kernel_joiner.h charges unsampled kernels by share).
 */
#define GF_KERNEL_WEIGHT_MAX 1000 /* the agent clamps larger weights */

/*
 * Hello sites: how the library learns that an agent has just attached. A
 * USDT semaphore counts the probe sites attached in a process, not the
 * tracers: a second agent attaching probes another already holds (or the
 * kernel still holding a stopped session's) changes nothing the library can
 * see, so it would not know to say again what it said once (that its tensor
 * hook is live, its stacks, its kernel names). The library exports
 * gpuflame_hello_sites, GF_HELLO_SITES never-run instructions (one nop each,
 * GF_SITE_BYTES apart), and gpuflame_hello_semaphore (an
 * unsigned short in .probes). Each agent, after its other probes, attaches
 * a uprobe on one site of its own random choice with the semaphore as its
 * reference counter: a new site raises the count, and the library greets the
 * newcomer at its next tick. A site another agent holds raises nothing (the
 * kernel writes a breakpoint, and counts it, once): an agent that sees the
 * count stay put moves to the next site. Additive: an agent skips a library
 * without the symbols.
 */
#define GF_HELLO_SITES 64

/* The stride of the hello and thrift sites: one nop each. */
#if defined(__aarch64__)
#define GF_SITE_BYTES 4
#else
#define GF_SITE_BYTES 1 /* x86-64's one-byte nop */
#endif

/*
 * Thrift sites: how an agent over its budget for gpuflame's time inside the
 * profiled processes (profiler/pipeline/guardrails.h, the overhead ladder)
 * asks the library to do less. The library exports gpuflame_thrift_sites,
 * GF_THRIFT_SITES never-run instructions laid out as the hello sites are,
 * and gpuflame_thrift_semaphore; an agent at thrift level k holds uprobes on
 * the first k sites with that semaphore as their reference counter, so the
 * count is the level (the highest any agent asks for: a site two agents hold
 * is counted once). The kernel lowers it when an agent detaches or dies: no
 * process stays thinned for an agent that is gone. At level k >= 1 the
 * in-process tensor hook samples even where gpuflame:tensor_exact asks for
 * every allocation (a process's start-up stays exact), at
 * GF_THRIFT_SAMPLE_FACTOR^k times its interval: a quarter of the taken
 * allocations' stack walks per level, each estimate still unbiased (the LIVE
 * announcement says the interval in effect); and its duty-cycled CUPTI
 * activity comes on 2^k times less often, each window's records weighted to
 * match (GF_GPU_ACTIVITY_WINDOW's weight; record's exact kernel time stays
 * exact). Additive: an agent skips a library without the symbols.
 */
#define GF_THRIFT_SITES 3
#define GF_THRIFT_SAMPLE_FACTOR 4

/* gpuflame:status(code, abi_version): what the injection library did, with
 * the GF_ABI_VERSION it was built with. A refusal is said once, at start;
 * GF_CUPTI_ACTIVE at start and again every flush period while an agent
 * listens (one may attach at any time). */
enum gf_cupti_status {
  GF_CUPTI_ACTIVE = 1,
  GF_CUPTI_OTHER_SUBSCRIBER = 2, /* torch.profiler / Nsight holds CUPTI: stepped aside */
  GF_CUPTI_FAILED = 3,           /* CUPTI refused (no driver support, old CUPTI) */
  GF_CUPTI_NOT_BUILT = 4,        /* gpuflame was built without CUPTI's headers: no kernel time */
  GF_CUPTI_FLUSHED = 5,          /* only at gpuflame:flushed (below), never at gpuflame:status */
};

/* gpuflame:flushed(code, abi_version, 0, 0, 0): the ask and the answer in
 * one probe, its arguments gpuflame:status's (code GF_CUPTI_FLUSHED), so
 * that an agent reads it with the same program. The library hands its
 * activity and tensor events to the agent every flush period
 * (GPUFLAME_FLUSH_MS, 1 s) and at exit, so a recording that ends while its
 * process runs on (`record --pid`, `record -d`, the agent's last window)
 * would lose up to a period of kernel records, the launches they join, and
 * a tick of tensor events. An agent ending one attaches this probe, which
 * raises its semaphore. On each tick (100 ms) on which the library reads
 * it raised, it flushes (CUPTI's completed activity, its tensor batch, its
 * cost) and then fires the probe, on the same thread: records the flush
 * handed out on that thread are in the ring before the answer. CUPTI may
 * keep a buffer whose kernels are still running, or complete one on its own
 * thread a moment later; those come at the next flush, which a recording
 * that has ended does not see. The agent waits a bounded time for an answer
 * fired after its ask, then detaches at once: the kernel counts a site once
 * per process, however many agents attach it, so the library flushes every
 * tick while any agent holds it. An agent that never attaches it never
 * reads GF_CUPTI_FLUSHED: additive, no version change. */

/*
 * In-process tensor events (inprocess/ in libgpuflame_cupti.so): where the
 * library is loaded, it hooks PyTorch's caching allocator from inside the
 * process (no trap per event), walks the calling thread's Python stack there,
 * and hands batches of records to the agent at the USDT probe
 * gpuflame:tensor_batch(records, bytes). The batch is a run of whole inner
 * records, each a gf_event and its payload, 8-byte aligned:
 *  - GF_EV_TENSOR_HOOK: the hook went live (GF_TENSOR_HOOK_LIVE; events of
 *    this process from ts_ns on come only from here) or could not (reason);
 *  - GF_EV_PY_STACK: a Python stack, sent once: arg0 = its ID (a 64-bit hash
 *    of the frames), py_count gf_py_frame follow (leaf first);
 *  - GF_EV_ALLOC with GF_EVF_STACK_REF: one u64 stack ID follows; addr, size
 *    (the allocator's block size), arg0 = device, arg1/arg2 = the allocator's
 *    allocated/reserved totals, as for GF_API_TORCH_REPORT;
 *    with GF_EVF_SAMPLED, a second u64: the bytes it stands for;
 *  - GF_EV_FREE: header only, the same fields;
 *  - GF_EV_ALLOC with GF_EVF_AUTOGRAD: an engine thread's allocation during a
 *    backward() call: the stack ID that follows is the caller's (or, with
 *    GF_EVF_AUTOGRAD_AMBIGUOUS, the u64 is the number of calls running);
 *  - GF_EV_AUTOGRAD_HOOK: the backward-origin hook's state (below).
 * A batch goes out when full, every 100 ms, and at once after a new stack
 * (the agent reads its code objects while they exist). When an agent
 * attaches (GF_HELLO_SITES), and every 10 s, the library says again that it
 * is live and forgets which stacks it sent.
 *
 * Sampling. Unless an agent attached gpuflame:tensor_exact() (a switch: only
 * its semaphore is read, as for kernel_time_exact), allocations are sampled
 * by bytes (inprocess/byte_sampler.h: Poisson, mean interval
 * GPUFLAME_TENSOR_SAMPLE_BYTES in the workload's environment, default
 * 4 MiB; one of at least the interval is always taken): a taken one carries
 * GF_EVF_SAMPLED and the bytes it stands for, on average its own, and the
 * rest are not sent. Only frees of blocks whose allocation was sent go out
 * (all frees if the library's table of them overflows). The LIVE
 * announcement's size field is the interval in effect, 0 when exact.
 */
#define GF_TENSOR_BATCH_MAX 16384 /* bytes per gpuflame:tensor_batch hit */
enum gf_tensor_hook {
  GF_TENSOR_HOOK_LIVE = 1,
  GF_TENSOR_HOOK_NO_TORCH = 2,       /* libc10_cuda.so is not loaded, or calls no hookable slot */
  GF_TENSOR_HOOK_NO_PYTHON = 3,      /* no CPython in the process: events without Python frames */
  GF_TENSOR_HOOK_UNSUPPORTED_PYTHON = 4, /* a CPython version without a layout: no Python frames */
  GF_TENSOR_HOOK_WALK_CHECK_FAILED = 5,  /* the first stack walk failed its checks: no Python frames */
  GF_TENSOR_HOOK_PATCH_FAILED = 6,   /* the GOT page could not be made writable */
};

/*
 * The backward origin (inprocess/autograd_origin.cc): loss.backward() runs
 * torch::autograd::Engine::execute on the calling thread (GIL released,
 * Python frames intact) and the device work on autograd's engine threads,
 * which run no Python (an idle thread state, no frames). The library hooks Engine::execute in
 * libtorch_python.so's GOT (once the tensor hook is live), sends the
 * caller's stack as a GF_EV_PY_STACK, and marks the engine threads' tensor
 * events (GF_EVF_AUTOGRAD) and launches (GF_EV_KERNEL_LAUNCH arg2/size)
 * with it while the call runs. Said once per process, GF_EV_AUTOGRAD_HOOK:
 */
/*
 * Without the library (the probes' path), BPF finds the same origin: a
 * uprobe on Engine::execute's entry records the caller (no return probe:
 * see bpf/lib/backward_callers.bpf.h), and a record from a thread without
 * Python frames carries the caller's frames (GF_EVF_BACKWARD_CALLER).
 * Both hook this symbol of libtorch_cpu.so (PyTorch 2.x): Engine::execute(
 * const edge_list&, const variable_list&, bool keep_graph, bool
 * create_graph, bool accumulate_grad, const edge_list& outputs).
 */
#define GF_TORCH_ENGINE_EXECUTE_SYMBOL \
  "_ZN5torch8autograd6Engine7executeERKSt6vectorINS0_4EdgeESaIS3_EERKS2_IN2at6TensorESaIS9_EEbbbS7_"
#define GF_TORCH_AUTOGRAD_LIBRARY "libtorch_cpu.so"
enum gf_autograd_hook {
  GF_AUTOGRAD_HOOK_LIVE = 1,
  GF_AUTOGRAD_HOOK_NOT_FOUND = 2,       /* libtorch_python.so not loaded, or no GOT slot for Engine::execute */
  GF_AUTOGRAD_HOOK_OTHER_SIGNATURE = 3, /* it calls an Engine::execute of another signature: not hooked */
  GF_AUTOGRAD_HOOK_PATCH_FAILED = 4,    /* the GOT page could not be made writable */
};

/*
 * gf_status_clock: gpuflame:status's third to fifth arguments (additive, no
 * version change: an agent from before reads two, a library from before
 * sends none, read as 0). With GF_CUPTI_ACTIVE the library reads
 * CLOCK_MONOTONIC, cuptiGetTimestamp() and CLOCK_MONOTONIC again, and passes
 * the three: CUPTI's clock (the one its activity records are stamped with)
 * against the BPF clock, once a flush period. GF_EV_CUPTI_STATUS carries
 * them in addr (CUPTI's), size and arg2 (monotonic before, after); user
 * space's timeline converts GPU records through them
 * (profiler/timeline/gpu_clock.h).
 */

/*
 * A USDT site's argument spec, as the BPF programs read it: libbpf's
 * struct __bpf_usdt_spec (bpf/usdt.bpf.h, libbpf 1.1), whose BPF_USDT() and
 * bpf_usdt_arg() the programs use, in its map __bpf_usdt_specs, indexed by
 * the site's BPF cookie. User space writes it (profiler/probes/usdt_notes.h
 * parses .note.stapsdt), not libbpf's bpf_program__attach_usdt, which makes
 * only perf-event uprobes; gpuflame.bpf.c asserts the two layouts are one.
 */
#define GF_USDT_MAX_ARGS 12
enum gf_usdt_arg_type {
  GF_USDT_ARG_CONST = 0,     /* val_off is the value */
  GF_USDT_ARG_REG = 1,       /* the register at reg_off in struct pt_regs */
  GF_USDT_ARG_REG_DEREF = 2, /* user memory at that register plus val_off */
};
struct gf_usdt_arg_spec {
  gf_u64 val_off;
  gf_u32 arg_type; /* enum gf_usdt_arg_type */
  gf_u16 reg_off; /* a small offset: gf_u16 is the same bits as libbpf's short */
  gf_u8 arg_signed;
  gf_u8 arg_bitshift; /* 64 - 8 * the argument's size */
};
struct gf_usdt_spec {
  struct gf_usdt_arg_spec args[GF_USDT_MAX_ARGS];
  gf_u64 usdt_cookie;
  gf_u16 arg_cnt;
  gf_u8 pad[6];
};

#endif /* GPUFLAME_BPF_GPUFLAME_ABI_H_ */
