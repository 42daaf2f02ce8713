/* SPDX-License-Identifier: Apache-2.0 */
/* Counters in the `stats` map (enum gf_stat): every drop is counted. */
#ifndef GPUFLAME_BPF_LIB_STATS_BPF_H_
#define GPUFLAME_BPF_LIB_STATS_BPF_H_

#include "maps.bpf.h"

static __always_inline void bump_by(__u32 stat, __u64 n) {
  __u64 *v = bpf_map_lookup_elem(&stats, &stat);
  if (v)
    *v += n; /* per-CPU; the sampler firing inside a probe between the load
              * and the store may lose one of the two counts, never more */
}

static __always_inline void bump(__u32 stat) {
  bump_by(stat, 1);
}

#endif /* GPUFLAME_BPF_LIB_STATS_BPF_H_ */
