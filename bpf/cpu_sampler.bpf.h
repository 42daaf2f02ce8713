/* SPDX-License-Identifier: Apache-2.0 */
/* CPU time: a stack per sampling tick that lands in a profiled process. */
#ifndef GPUFLAME_BPF_CPU_SAMPLER_BPF_H_
#define GPUFLAME_BPF_CPU_SAMPLER_BPF_H_

#include "lib/vmlinux_min.h"

#include <bpf/bpf_helpers.h>

#include "gpuflame_abi.h"
#include "lib/config.bpf.h"
#include "lib/maps.bpf.h"
#include "lib/stacks.bpf.h"
#include "lib/stats.bpf.h"

/* One perf event per CPU (cpu-clock at the sampling rate) lands here in
 * whatever task is running; only profiled processes are kept. */
SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tgid == 0)
    return 0;
  /* Not wanted(): in machine-wide mode only processes marked for sampling,
   * never every task on the machine. */
  __u32 *flags = bpf_map_lookup_elem(&targets, &tgid);
  if (!flags || !(*flags & (GF_TARGET_TRACE | GF_TARGET_SAMPLE)))
    return 0;
  if (shed & GF_SHED_CPU_SAMPLES) {
    bump(GF_STAT_SHED_CPU_SAMPLES);
    return 0;
  }
  bump(GF_STAT_CPU_SAMPLES);
  if (want_user_stack(1)) {
    /* The user registers as the thread last left user mode: right whether
     * the tick interrupted user code or a system call. */
    struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
    submit_with_user_stack(regs, GF_EV_CPU_SAMPLE, GF_DOMAIN_CPU, GF_API_NONE, 0, 0, 0, 0, 0, 0);
  } else {
    submit_stack_kind(ctx, GF_EV_CPU_SAMPLE, GF_DOMAIN_CPU, GF_API_NONE, 0, 0, 0, 0, 0, 0);
  }
  return 0;
}

#endif /* GPUFLAME_BPF_CPU_SAMPLER_BPF_H_ */
