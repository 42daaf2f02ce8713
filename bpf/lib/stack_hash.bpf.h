/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The 128-bit ID of a Python stack (gpuflame_abi.h, struct gf_stack_id),
 * computed by the walker frame by frame as it writes them
 * (lib/python_stack.bpf.h), where a frame's words are still in L1 and the
 * multiplies overlap the walk's own reads, and finished by
 * lib/stack_ids.bpf.h: no second pass over the frames.
 *
 * Each frame's three words are folded into one by two multiplies that do
 * not wait on the hash (two frames that differ fold alike with odds of
 * about 2^-64), and the sequence is hashed by one multiply per frame (lane
 * a); lane b, a rotating sum, only widens the ID. An accidental collision
 * between two of a process's stacks is out of reach (about n^2 / 2^65 for
 * lane a alone); the workload chooses only where its code objects lie.
 */
#ifndef GPUFLAME_BPF_LIB_STACK_HASH_BPF_H_
#define GPUFLAME_BPF_LIB_STACK_HASH_BPF_H_

#include "vmlinux_min.h"

#include "gpuflame_abi.h"

struct gf_stack_hash {
  __u64 a;
  __u64 b;
};

static __always_inline __u64 gf_rotl64(__u64 x, int r) {
  return (x << r) | (x >> (64 - r));
}

/* MurmurHash3's 64-bit finaliser: every input bit moves every output bit. */
static __always_inline __u64 gf_fmix64(__u64 k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

/* Seeded by the process's generation (struct gf_py_proc): a reused pid or
 * a new image never repeats an ID user space holds for another. */
static __always_inline void gf_stack_hash_start(struct gf_stack_hash *h, __u32 generation) {
  h->a = 0x9e3779b97f4a7c15ULL ^ generation;
  h->b = generation;
}

/* One frame as written: code, aux (3.10's class of self, else 0), then
 * instr, first_line and flags in one word. */
static __always_inline void gf_stack_hash_frame(struct gf_stack_hash *h, const struct gf_py_frame *f) {
  const __u64 *w = (const __u64 *)f;
  __u64 m = (w[0] ^ (w[1] << 1)) * 0x87c37b91114253d5ULL ^ w[2] * 0x4cf5ad432745937fULL;
  __u64 a = (h->a ^ m) * 0xff51afd7ed558ccdULL;
  h->a = a ^ (a >> 32);
  h->b = gf_rotl64(h->b + m, 23);
}

static __always_inline void gf_stack_hash_end(const struct gf_stack_hash *h, __u32 n, struct gf_stack_id *id) {
  id->lo = gf_fmix64(h->a ^ n);
  id->hi = gf_fmix64(h->b ^ ((__u64)n << 32) ^ id->lo);
}

#endif /* GPUFLAME_BPF_LIB_STACK_HASH_BPF_H_ */
