/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process lifecycle and gating: user space must attach a process's library
 * probes before that process allocates anything. Lifecycle records (exec,
 * a watched library mapped, exit, Py_FinalizeEx) tell it when; a gated
 * target (GF_TARGET_GATE) is also stopped with SIGSTOP at that point, and
 * user space sends SIGCONT once attached (GF_EVF_GATED). Every stop is
 * written down in `held` (struct gf_held) first, for gpuflame's guardian.
 * Each thread's exit also clears the per-thread maps of calls in flight
 * (cuda_alloc, cuda_sync, nccl_calls), and says which NCCL or synchronise
 * call a thread ended in while its process lives on (GF_EV_THREAD_ENDED),
 * which is why this file comes last.
 */
#ifndef GPUFLAME_BPF_PROCESS_LIFECYCLE_BPF_H_
#define GPUFLAME_BPF_PROCESS_LIFECYCLE_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cuda_alloc.bpf.h"
#include "cuda_sync.bpf.h"
#include "gpuflame_abi.h"
#include "lib/backward_callers.bpf.h"
#include "lib/config.bpf.h"
#include "lib/emit.bpf.h"
#include "lib/maps.bpf.h"
#include "lib/stats.bpf.h"
#include "lib/targets.bpf.h"
#include "lib/tensor_sampling.bpf.h"
#include "nccl_calls.bpf.h"

#define GF_SIGCONT 18
#define GF_SIGSTOP 19
#define GF_EEXIST 17
#define GF_PROT_EXEC 0x4

/* The processes a gate stopped and nothing has resumed since (struct
 * gf_held). gpuflame's guardian holds a descriptor of it, so it outlives a
 * killed gpuflame: the guardian resumes what it lists. Written only when a
 * gate stops a process, at its SIGCONT and at its exit: never per event. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, GF_HELD_MAX);
  __type(key, __u32); /* tgid */
  __type(value, struct gf_held);
} held SEC(".maps");

/* GF_EVF_GATED for a gated target, else 0. */
static __always_inline __u32 maybe_gate(__u32 tflags) {
  return (tflags & GF_TARGET_GATE) && !gates_open ? GF_EVF_GATED : 0;
}

/* Hands a lifecycle record over, and stops the process if it is gated, so
 * that user space can attach before it runs on: only once the record is in
 * the ring, since nothing else would ever resume it; and only once `held`
 * has room for it, since after a SIGKILL of gpuflame nothing else would
 * find it. An entry whose record did not fit stays unmarked (the guardian
 * ignores those) until the process exits. */
static __always_inline void submit_lifecycle(struct gf_event *ev) {
  __u32 tgid = ev->pid;
  struct gf_held h = {};
  if (ev->flags & GF_EVF_GATED) {
    struct task_struct *task = bpf_get_current_task_btf();
    h.start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
    /* EEXIST: another of its threads is at a gate too; one entry holds both. */
    long err = bpf_map_update_elem(&held, &tgid, &h, BPF_NOEXIST);
    if (err && err != -GF_EEXIST) {
      ev->flags &= ~GF_EVF_GATED;
      bump(GF_STAT_GATE_UNHELD);
    }
  }
  if (!emit_lifecycle(ev) || !(ev->flags & GF_EVF_GATED))
    return;
  bpf_send_signal(GF_SIGSTOP);
  /* Marked after the signal is sent (it is queued synchronously here), so a
   * SIGCONT that watch_sigcont sees on a marked entry always ends this stop.
   * A SIGCONT landing between the two leaves a mark on a running process,
   * the safe way round: user space still handles the record and resumes
   * it, and the guardian resumes only processes that are stopped. */
  h.stop_ns = bpf_ktime_get_ns();
  struct gf_held *e = bpf_map_lookup_elem(&held, &tgid);
  if (e)
    e->stop_ns = h.stop_ns;
  else
    bpf_map_update_elem(&held, &tgid, &h, BPF_ANY);
  bump(GF_STAT_GATED);
}

static __always_inline bool has_prefix(const char *name, const char *prefix, int len) {
  for (int i = 0; i < len; i++)
    if (name[i] != prefix[i])
      return false;
  return true;
}

/* The file behind descriptor |fd| of the current task, or NULL. */
static __always_inline struct file *fd_file(int fd) {
  struct task_struct *task = bpf_get_current_task_btf();
  struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
  if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
    return NULL;
  struct file **fds = BPF_CORE_READ(fdt, fd);
  struct file *file = NULL;
  bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]);
  return file;
}

/* x86-64's numbers: a child returns from these into its own copy of its
 * parent (vfork, 58, always shares its parent's memory). */
#define GF_NR_CLONE 56
#define GF_NR_FORK 57
#define GF_NR_CLONE3 435

/* In a child, as it returns from fork() or clone() (the syscall-exit hook
 * runs in the new task too, before its first user instruction): a followed
 * process's child that has memory of its own needs probes of its own
 * (follow_forks), and a gated one waits for them here. */
static __always_inline void say_forked_child(void) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if ((__u32)id != tgid)
    return; /* a new thread: its process's probes fire for it */
  /* watch_fork made the child of a followed process a target before it ran. */
  __u32 tflags = target_flags(tgid);
  if (!(tflags & GF_TARGET_TRACE) || tgid == self_tgid)
    return;
  struct task_struct *task = bpf_get_current_task_btf();
  struct task_struct *parent = BPF_CORE_READ(task, real_parent);
  if (BPF_CORE_READ(task, mm) == BPF_CORE_READ(parent, mm))
    return; /* CLONE_VM: the parent's memory, where the parent's probes fire */
  struct gf_event ev;
  fill_header(&ev, GF_EV_FORKED, GF_DOMAIN_NONE, 0, 0, 0);
  ev.arg0 = BPF_CORE_READ(parent, tgid);
  ev.flags = maybe_gate(tflags);
  submit_lifecycle(&ev);
}

/*
 * Every executable file mapping (how ld.so maps a library's text) whose file
 * name says CUDA, PyTorch (libc10*, and libtorch_cpu.so for backward()
 * callers), NCCL (libnccl.so*: its calls are probed) or libpython. The raw sys_exit tracepoint is the
 * hook because this kernel class offers neither kprobes without tracefs nor
 * fentry; the syscall-number test keeps every other syscall to a few
 * instructions. At exit the mapping exists, so a gated process stopped here
 * shows it in /proc/PID/maps. The same hook hears a forked child's first
 * return (say_forked_child), where probes are per process.
 */
#define GF_NR_MMAP 9
SEC("tp_btf/sys_exit")
int BPF_PROG(watch_mmap, struct pt_regs *regs, long ret) {
  /* Every syscall of the machine passes here: one direct load (a BTF
   * pointer) rejects the others, before any copy. Where probes are per
   * process, a return of 0 from the fork calls is a child's first step. */
  long nr = regs->orig_ax;
  if (nr != GF_NR_MMAP) {
    if (follow_forks && ret == 0 && (nr == GF_NR_CLONE || nr == GF_NR_FORK || nr == GF_NR_CLONE3))
      say_forked_child();
    return 0;
  }
  struct pt_regs r;
  if (bpf_probe_read_kernel(&r, sizeof(r), regs))
    return 0;
  if ((ret < 0 && ret > -4096) || !(r.dx & GF_PROT_EXEC))
    return 0;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  __u32 tflags = target_flags(tgid);
  if (tgid == self_tgid || (filter_targets && !(tflags & GF_TARGET_TRACE)))
    return 0;
  struct file *file = fd_file((int)r.r8);
  if (!file)
    return 0;
  char name[16] = {};
  const unsigned char *dname = BPF_CORE_READ(file, f_path.dentry, d_name.name);
  if (bpf_probe_read_kernel_str(name, sizeof(name), dname) <= 0)
    return 0;
  if (!has_prefix(name, "libcuda", 7) && !has_prefix(name, "libc10", 6) &&
      !has_prefix(name, "libpython3", 10) && !has_prefix(name, "libgpuflame_cup", 15) &&
      !has_prefix(name, "libtorch_cpu.so", 15) && !has_prefix(name, "libnccl.so", 10))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_LIB_MAPPED, GF_DOMAIN_NONE, 0, (__u64)ret, 0);
  ev.arg0 = BPF_CORE_READ(file, f_inode, i_ino);
  ev.arg1 = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
  ev.flags = maybe_gate(tflags);
  if (gate_new_files && held_guarded && !ev.flags && !gates_open) {
    /* A file nobody attached yet: this process waits for its probes. */
    struct gf_file_key key = {.ino = ev.arg0, .dev = ev.arg1};
    if (!bpf_map_lookup_elem(&covered_files, &key))
      ev.flags = maybe_gate(GF_TARGET_GATE);
  }
  submit_lifecycle(&ev);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(watch_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  tensor_sampling_forget(tgid); /* machine-wide too: every process may be sampled */
  __u32 tflags = target_flags(tgid);
  if (!(tflags & GF_TARGET_TRACE))
    return 0;
  /* The old image's interpreter layout must not walk the new one's memory,
   * even for the moment until user space hears of the exec. */
  bpf_map_delete_elem(&py_procs, &tgid);
  bpf_map_delete_elem(&backward_calls, &tgid);
  struct gf_event ev;
  fill_header(&ev, GF_EV_EXEC, GF_DOMAIN_NONE, 0, 0, 0);
  ev.flags = maybe_gate(tflags);
  submit_lifecycle(&ev);
  return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(watch_fork, struct task_struct *parent, struct task_struct *child) {
  __u32 ptgid = BPF_CORE_READ(parent, tgid);
  __u32 tflags = target_flags(ptgid);
  if (!(tflags & GF_TARGET_FOLLOW))
    return 0;
  __u32 ctgid = BPF_CORE_READ(child, tgid);
  if (ctgid == ptgid)
    return 0; /* a new thread, not a new process */
  bpf_map_update_elem(&targets, &ctgid, &tflags, BPF_ANY);
  /* A forked child (a DataLoader worker) has its parent's address space:
   * its Python stacks walk with the same layout until it execs. */
  struct gf_py_proc *py = bpf_map_lookup_elem(&py_procs, &ptgid);
  if (py)
    bpf_map_update_elem(&py_procs, &ctgid, py, BPF_ANY);
  return 0;
}

/* A thread that ends inside a probed call never passes its uretprobe: killed
 * with its process while it waited in a synchronise or a collective (a hung
 * job's watchdog, an OOM kill), or ended by pthread_exit in a callback. Its
 * in-flight entry would outlive it, and a later thread given the same ID
 * would be taken for a call nested in it, its own calls never recorded. So
 * each exiting thread's entries go here, counted. Four hash deletes per
 * thread exit on the machine, whoever it is (the targets map may already
 * have forgotten an exiting process): thread exits are rare next to the
 * probed calls, and each costs far more than these. */
/* Returns the GF_ENDED_* bits of the NCCL and synchronise calls it was in. */
static __always_inline __u32 forget_calls_in_flight(__u64 id) {
  __u64 ended = 0;
  __u32 open = 0;
  ended += bpf_map_delete_elem(&runtime_calls, &id) == 0;
  ended += bpf_map_delete_elem(&driver_calls, &id) == 0;
  if (bpf_map_delete_elem(&sync_calls, &id) == 0)
    open |= GF_ENDED_SYNC_CALL;
  if (bpf_map_delete_elem(&nccl_calls, &id) == 0)
    open |= GF_ENDED_NCCL_CALL;
  /* Per thread: a killed cudaMalloc holds a runtime and a driver entry. */
  if (ended || open)
    bump(GF_STAT_CALLS_ENDED_WITH_THREAD);
  return open;
}

/* A thread that ended inside an NCCL or synchronise call while its process
 * lives on: user space hears of the call's entry and would keep it open
 * until the process ends (a hang that never ends, in the agent's gauge).
 * Said on `events`, behind the thread's own records. When the whole
 * process is exiting (a kill, exit_group: SIGNAL_GROUP_EXIT; or its last
 * thread) its GF_EV_EXIT ends the calls, as "process ended". */
static __always_inline void say_thread_ended(struct task_struct *p, __u32 tgid, __u32 open) {
  if (!open || !wanted(tgid))
    return;
  struct signal_struct *sig = BPF_CORE_READ(p, signal);
  if (!sig || (BPF_CORE_READ(sig, flags) & GF_SIGNAL_GROUP_EXIT) || BPF_CORE_READ(sig, live.counter) <= 0)
    return;
  struct gf_event ev;
  fill_header(&ev, GF_EV_THREAD_ENDED, GF_DOMAIN_NONE, 0, 0, 0);
  ev.arg0 = open;
  if (emit(&ev, sizeof(ev), true))
    bump(GF_STAT_THREAD_ENDED_SENT);
}

/* A thread's exit; |group_dead|: the last of its process's, so the process
 * has ended. Not the leader's exit: a leader that ends first (pthread_exit,
 * as a C++ main() may) leaves its process running in the other threads,
 * whose events must still count. */
static __always_inline int on_thread_exit(struct task_struct *p, bool group_dead) {
  __u32 pid = BPF_CORE_READ(p, pid);
  __u32 tgid = BPF_CORE_READ(p, tgid);
  say_thread_ended(p, tgid, forget_calls_in_flight((__u64)tgid << 32 | pid));
  if (!group_dead)
    return 0;
  bpf_map_delete_elem(&nccl_procs, &tgid);
  bpf_map_delete_elem(&backward_calls, &tgid);
  tensor_sampling_forget(tgid);
  /* Before its pid can be reused: no entry outlives its process. */
  bpf_map_delete_elem(&held, &tgid);
  if (!bpf_map_lookup_elem(&targets, &tgid))
    return 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_EXIT, GF_DOMAIN_NONE, 0, 0, 0);
  emit_lifecycle(&ev);
  return 0;
}

/* Where the tracepoint says whether the group died with this thread (its
 * second argument, where its record has group_dead: 6.18 has it), the
 * kernel decided it atomically: one thread of a process, however many exit
 * at once, ends it. Older kernels pass the task only, and signal->live
 * cannot stand in for it: threads exiting together may all read it after
 * the last decrement, and the process would end several times. There the
 * leader's exit ends it: a process that outlives its leader is taken to
 * have ended with it. Which one is settled at load (CO-RE): the verifier
 * never sees the second argument's read on a kernel without it. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(watch_exit, struct task_struct *p) {
  bool group_dead;
  if (bpf_core_field_exists(struct trace_event_raw_sched_process_exit, group_dead))
    group_dead = (bool)ctx[1];
  else
    group_dead = BPF_CORE_READ(p, pid) == BPF_CORE_READ(p, tgid);
  return on_thread_exit(p, group_dead);
}

/* Any SIGCONT that reaches a held process after its gate's SIGSTOP ends
 * that hold, whoever sent it (gpuflame lifting the gate, its guardian, a
 * user): the entry goes with it, in the kernel, so that a stop by someone
 * else later is never taken for ours. Every signal of the machine passes
 * here; all but SIGCONT leave at the first compare. */
SEC("tp_btf/signal_generate")
int BPF_PROG(watch_sigcont, int sig, struct kernel_siginfo *info, struct task_struct *task, int group,
             int result) {
  if (sig != GF_SIGCONT)
    return 0;
  __u32 tgid = BPF_CORE_READ(task, tgid);
  struct gf_held *e = bpf_map_lookup_elem(&held, &tgid);
  if (e && e->stop_ns)
    bpf_map_delete_elem(&held, &tgid);
  return 0;
}

/* Py_FinalizeEx: code objects are about to be freed. A gated process waits
 * here until user space has drained the ring buffer and read every name. */
SEC("uprobe")
int py_finalize(struct pt_regs *ctx) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  __u32 tflags = target_flags(tgid);
  struct gf_py_proc *py = bpf_map_lookup_elem(&py_procs, &tgid);
  if (!py)
    return 0;
  /* An interpreter initialized again (embedders) may get another key. */
  py->tss_key_plus1 = 0;
  struct gf_event ev;
  fill_header(&ev, GF_EV_PY_FINALIZE, GF_DOMAIN_NONE, 0, 0, 0);
  ev.flags = maybe_gate(tflags);
  submit_lifecycle(&ev);
  return 0;
}

#endif /* GPUFLAME_BPF_PROCESS_LIFECYCLE_BPF_H_ */
