/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The few kernel types gpuflame's BPF programs touch, declared with
 * preserve_access_index so libbpf relocates every field against the running
 * kernel's BTF (CO-RE). Keeping this to the fields we read, instead of a
 * 3 MB generated vmlinux.h, makes each dependency on kernel layout visible.
 */
#ifndef GPUFLAME_BPF_LIB_VMLINUX_MIN_H_
#define GPUFLAME_BPF_LIB_VMLINUX_MIN_H_
/* Tells bpf_tracing.h to use the kernel pt_regs field names below. */
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef int pid_t;
typedef unsigned int dev_t;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
  BPF_MAP_TYPE_HASH = 1,
  BPF_MAP_TYPE_ARRAY = 2,
  BPF_MAP_TYPE_PERCPU_ARRAY = 6,
  BPF_MAP_TYPE_LRU_HASH = 9,
  BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
  BPF_RB_NO_WAKEUP = 1,
  BPF_RB_FORCE_WAKEUP = 2,
  BPF_RB_AVAIL_DATA = 0,
};

enum {
  BPF_ANY = 0,
  BPF_NOEXIST = 1,
  BPF_F_USER_STACK = 256,
};

/* x86-64 user register frame handed to uprobes (layout is ABI, not CO-RE). */
struct pt_regs {
  unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
  unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/* The context of perf_event programs (UAPI, fixed layout). */
typedef struct pt_regs bpf_user_pt_regs_t;
struct bpf_perf_event_data {
  bpf_user_pt_regs_t regs;
  __u64 sample_period;
  __u64 addr;
};

struct thread_struct {
  unsigned long fsbase;
} __attribute__((preserve_access_index));

/* sched_process_exit's record: only asked whether it has group_dead (the
 * tracepoint then passes it as its second argument; 6.18 does). */
struct trace_event_raw_sched_process_exit {
  bool group_dead;
} __attribute__((preserve_access_index));

struct fdtable {
  unsigned int max_fds;
  struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
  struct fdtable *fdt;
} __attribute__((preserve_access_index));

typedef struct {
  int counter;
} atomic_t;

/* Shared by a process's threads. SIGNAL_GROUP_EXIT (include/linux/sched/signal.h):
 * the whole process is exiting (exit_group, a fatal signal). */
#define GF_SIGNAL_GROUP_EXIT 0x00000004
struct signal_struct {
  atomic_t live; /* threads not yet past do_exit's count (0: the last one is exiting) */
  unsigned int flags;
} __attribute__((preserve_access_index));

struct mm_struct;

/* A thread's IDs, one per PID namespace from the root down to its own
 * (level): numbers[level].nr is what its own namespace calls it. */
struct upid {
  int nr;
  void *ns;
} __attribute__((preserve_access_index));

struct pid {
  unsigned int level;
  struct upid numbers[1];
} __attribute__((preserve_access_index));

struct task_struct {
  struct mm_struct *mm;
  struct task_struct *real_parent;
  struct files_struct *files;
  struct signal_struct *signal;
  int pid;
  int tgid;
  struct task_struct *group_leader;
  struct thread_struct thread;
  __u64 start_boottime; /* ns since boot, suspend included: /proc/PID/stat's starttime */
  struct pid *thread_pid;
} __attribute__((preserve_access_index));

struct qstr {
  const unsigned char *name;
} __attribute__((preserve_access_index));

struct dentry {
  struct qstr d_name;
} __attribute__((preserve_access_index));

struct path {
  struct dentry *dentry;
} __attribute__((preserve_access_index));

struct super_block {
  dev_t s_dev;
} __attribute__((preserve_access_index));

struct inode {
  unsigned long i_ino;
  struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct file {
  struct path f_path;
  struct inode *f_inode;
} __attribute__((preserve_access_index));

struct linux_binprm;
struct file;
struct kernel_siginfo;


#endif /* GPUFLAME_BPF_LIB_VMLINUX_MIN_H_ */
