/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Model-loading I/O as timeline spans: openat (the path), read and pread64
 * (the bytes), mmap of a file (the length, the file's name) and ioctl on a
 * GPU device file (/dev/nvidia*), in followed processes only, one record per
 * call at its return (GF_EV_IO), with its entry's time.
 *
 * The hooks are the raw syscall tracepoints through BTF (tp_btf/sys_enter,
 * tp_btf/sys_exit): this kernel class offers neither kprobes (no tracefs)
 * nor fentry, and the per-syscall tracepoints need tracefs to be found. The
 * raw ones run for every syscall of the machine, so both programs reject
 * every other syscall number with one compare before anything else, and the
 * entry then drops every process but the followed ones with one hash lookup
 * (`targets`). Neither is loaded without the timeline (BpfProbes::Options::
 * io_spans): then no syscall pays anything.
 *
 * Cost bounds, each drop counted in `stats` (record's summary.json, the
 * trace's metadata): reads under io_min_bytes that took less than io_min_ns
 * are not sent (GF_STAT_IO_SMALL: a Python loader reads a weights file in a
 * few large calls, a tokenizer or an import in many small ones); past
 * io_max_per_process records a process sends no more (GF_STAT_IO_OVER_CAP).
 * The entry map is an LRU: a thread killed inside a read leaves an entry
 * that ages out, and no exit hook has to clear it. It holds 16,384 threads
 * in a syscall at once; past that, the oldest entry's call goes unrecorded.
 *
 * No stack is taken: a Python walk costs more than the syscall it would
 * describe (the CPU samples on the thread's own track say where it was).
 */
#ifndef GPUFLAME_BPF_IO_CALLS_BPF_H_
#define GPUFLAME_BPF_IO_CALLS_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gpuflame_abi.h"
#include "lib/emit.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"

/* x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
#define GF_NR_READ 0
#define GF_NR_IO_MMAP 9
#define GF_NR_IOCTL 16
#define GF_NR_PREAD64 17
#define GF_NR_OPENAT 257
#define GF_MAP_ANONYMOUS 0x20

static __always_inline bool io_syscall(long nr) {
  return nr == GF_NR_READ || nr == GF_NR_PREAD64 || nr == GF_NR_OPENAT || nr == GF_NR_IO_MMAP || nr == GF_NR_IOCTL;
}

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);   /* pid_tgid */
  __type(value, __u64); /* CLOCK_MONOTONIC at entry */
} io_entries SEC(".maps");

/* Records sent per process, against io_max_per_process (LRU: an exited
 * process's count ages out). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, __u32);
} io_sent SEC(".maps");

/* One record: the header and the name, built in a per-CPU scratch (the BPF
 * stack holds 512 bytes). */
struct gf_io_record {
  struct gf_event ev;
  char name[GF_IO_NAME_MAX];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gf_io_record);
} io_scratch SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(io_enter, struct pt_regs *regs, long nr) {
  if (!io_syscall(nr))
    return 0;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  /* Followed processes only, machine-wide too (`targets` then holds the
   * processes the registry knows). */
  if (tgid == self_tgid || !(target_flags(tgid) & GF_TARGET_TRACE))
    return 0;
  __u64 now = bpf_ktime_get_ns();
  bpf_map_update_elem(&io_entries, &id, &now, BPF_ANY);
  return 0;
}

/* The file name (the dentry's, no directory) behind |fd| into |out|; its
 * length with the NUL, or <= 0. */
static __always_inline long io_file_name(int fd, char *out) {
  struct file *file = fd_file(fd);
  if (!file)
    return 0;
  const unsigned char *dname = BPF_CORE_READ(file, f_path.dentry, d_name.name);
  return bpf_probe_read_kernel_str(out, GF_IO_NAME_MAX, dname);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(io_exit, struct pt_regs *regs, long ret) {
  /* Every syscall of the machine passes here: one direct load rejects the
   * others. */
  long nr = regs->orig_ax;
  if (!io_syscall(nr))
    return 0;
  __u64 id = bpf_get_current_pid_tgid();
  /* No entry: a process not followed (or a call that began before the
   * programs were attached). Not counted: telling the two apart would cost
   * every other process's I/O a second lookup (`targets`). */
  __u64 *entry = bpf_map_lookup_elem(&io_entries, &id);
  if (!entry)
    return 0;
  __u64 start = *entry;
  bpf_map_delete_elem(&io_entries, &id);
  __u64 now = bpf_ktime_get_ns();
  __u64 arg0 = regs->di, arg1 = regs->si, arg2 = regs->dx, arg3 = regs->r10, arg4 = regs->r8, arg5 = regs->r9;
  __u16 call;
  __u64 fd = arg0, bytes = 0, extra = 0;
  if (nr == GF_NR_READ || nr == GF_NR_PREAD64) {
    call = nr == GF_NR_READ ? GF_IO_READ : GF_IO_PREAD64;
    bytes = ret > 0 ? (__u64)ret : 0;
    extra = nr == GF_NR_PREAD64 ? arg3 : 0;
    if (bytes < io_min_bytes && now - start < io_min_ns) {
      bump(GF_STAT_IO_SMALL);
      return 0;
    }
  } else if (nr == GF_NR_IO_MMAP) {
    if ((arg3 & GF_MAP_ANONYMOUS) || (int)arg4 < 0)
      return 0; /* no file: not I/O */
    call = GF_IO_MMAP;
    fd = (__u64)(__s64)(int)arg4;
    bytes = arg1;
    extra = arg5;
  } else if (nr == GF_NR_IOCTL) {
    call = GF_IO_IOCTL;
    extra = arg1;
  } else {
    call = GF_IO_OPENAT;
    extra = arg2;
  }
  __u32 tgid = id >> 32;
  __u32 *sent = bpf_map_lookup_elem(&io_sent, &tgid);
  if (sent && *sent >= io_max_per_process) {
    bump(GF_STAT_IO_OVER_CAP);
    return 0;
  }
  __u32 zero = 0;
  struct gf_io_record *rec = bpf_map_lookup_elem(&io_scratch, &zero);
  if (!rec)
    return 0;
  long n = 0;
  if (call == GF_IO_OPENAT) {
    n = bpf_probe_read_user_str(rec->name, GF_IO_NAME_MAX, (const void *)arg1);
  } else if (call == GF_IO_MMAP || call == GF_IO_IOCTL) {
    n = io_file_name((int)fd, rec->name);
    /* Only the GPU's device files: the driver's ioctls are its calls. */
    if (call == GF_IO_IOCTL && (n < 7 || rec->name[0] != 'n' || rec->name[1] != 'v' || rec->name[2] != 'i' ||
                                rec->name[3] != 'd' || rec->name[4] != 'i' || rec->name[5] != 'a'))
      return 0;
  }
  if (n <= 0) {
    rec->name[0] = 0;
    n = 1;
  }
  __u32 len = (__u32)n;
  if (len > GF_IO_NAME_MAX)
    len = GF_IO_NAME_MAX;
  fill_header(&rec->ev, GF_EV_IO, GF_DOMAIN_IO, call, fd, bytes);
  rec->ev.ts_ns = now;
  rec->ev.arg0 = (__u64)ret;
  rec->ev.arg1 = extra;
  rec->ev.arg2 = start;
  if (len == GF_IO_NAME_MAX)
    rec->ev.flags |= GF_EVF_IO_NAME_TRUNCATED;
  if (sent) {
    __sync_fetch_and_add(sent, 1);
  } else {
    __u32 one = 1;
    bpf_map_update_elem(&io_sent, &tgid, &one, BPF_NOEXIST);
  }
  bump(GF_STAT_IO_SPANS);
  emit(rec, sizeof(struct gf_event) + len, false);
  return 0;
}

#endif /* GPUFLAME_BPF_IO_CALLS_BPF_H_ */
