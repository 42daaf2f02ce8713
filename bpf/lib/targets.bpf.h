/* SPDX-License-Identifier: Apache-2.0 */
/* Which processes are profiled: the first test of every hot-path program. */
#ifndef GPUFLAME_BPF_LIB_TARGETS_BPF_H_
#define GPUFLAME_BPF_LIB_TARGETS_BPF_H_

#include "config.bpf.h"
#include "maps.bpf.h"

/* Take this process's events? Without filtering (machine-wide), every one. */
static __always_inline bool wanted(__u32 tgid) {
  if (tgid == self_tgid)
    return false;
  if (!filter_targets)
    return true;
  __u32 *flags = bpf_map_lookup_elem(&targets, &tgid);
  return flags && (*flags & GF_TARGET_TRACE);
}

/* The process's enum gf_target_flags; 0 when it is not a target. */
static __always_inline __u32 target_flags(__u32 tgid) {
  __u32 *flags = bpf_map_lookup_elem(&targets, &tgid);
  return flags ? *flags : 0;
}

#endif /* GPUFLAME_BPF_LIB_TARGETS_BPF_H_ */
