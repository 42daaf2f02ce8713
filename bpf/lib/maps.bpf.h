/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The maps user space shares with every concern: the ring buffer records
 * leave by, the drop/health counters, the set of profiled processes and
 * each Python process's interpreter layout. Maps private to one concern
 * (scratch records, calls in flight) live with that concern.
 */
#ifndef GPUFLAME_BPF_LIB_MAPS_BPF_H_
#define GPUFLAME_BPF_LIB_MAPS_BPF_H_

#include "vmlinux_min.h"

#include <bpf/bpf_helpers.h>

#include "gpuflame_abi.h"

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20); /* resized by user space */
} events SEC(".maps");

/* A ring of its own for the process lifecycle records whose loss costs most
 * and whose order among the process's other records does not matter (a
 * library mapped: the process is scanned, its probes attached; an exit): a
 * burst of events cannot fill it. User space reads it after `events` in
 * each pass, so an exit comes after the process's records. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 << 10);
} lifecycle SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GF_STAT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

/* Records the ring had no room for (gpuflame_abi.h, struct gf_loss). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct gf_loss_key);
  __type(value, struct gf_loss);
} losses SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct gf_lost_key);
  __type(value, struct gf_lost_event);
} lost_events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, __u32); /* enum gf_target_flags */
} targets SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32); /* tgid */
  __type(value, struct gf_py_proc);
} py_procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, struct gf_file_key);
  __type(value, __u8);
} covered_files SEC(".maps");

#endif /* GPUFLAME_BPF_LIB_MAPS_BPF_H_ */
