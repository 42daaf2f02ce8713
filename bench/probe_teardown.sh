#!/bin/bash
# How long record's probes outlive it: a process started right after
# `gpuflame record` exits may still trap on the uprobes the kernel has not
# removed yet. Each round records bench/nccl_call_cost.c on the simulated
# libnccl.so.2 (so that record attaches its CUDA-less NCCL probes), then
# runs the same program bare at a few delays after record returned, and
# prints its ns per all-reduce at each (bare, untrapped: about 0.1-0.5 us;
# trapped: several us). The delays add up: each sample is later than the
# last. Two settings, interleaved:
#   multi  the uprobes as uprobe_multi links (the default where the kernel
#          makes them, profiler/probes/uprobe_multi.h)
#   perf   one perf-event uprobe each (GPUFLAME_UPROBE_MULTI=0)
# Also prints how long record took to exit after its command did. Needs root.
# Usage: bench/probe_teardown.sh [BUILD_DIR] [ROUNDS]; COST_BIN and NCCL_LIB
# as in nccl_call_cost.sh.
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
gpuflame=$build/gpuflame
nccl=${NCCL_LIB:-$(cd "$build/cuda_sim" && pwd)/libnccl.so.2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GF_SIM_NCCL_DIR=$work
if [ -n "${COST_BIN:-}" ]; then cp "$COST_BIN" "$work/cost"; else cc -O2 -o "$work/cost" "$(dirname "$0")/nccl_call_cost.c" -ldl; fi
now() { date +%s.%N; }
for ((r = 0; r < rounds; r++)); do
  for mode in multi perf; do
    sleep 4  # the previous round's probes gone
    multi=1
    [ "$mode" = perf ] && multi=0
    t0=$(now)
    GPUFLAME_UPROBE_MULTI=$multi "$gpuflame" record -q --cpu-hz 0 -o "$work/rec" -- "$work/cost" "$nccl" 2000 > /dev/null
    t1=$(now)
    line="$mode exit_s $(printf %.2f "$(echo "$t1 - $t0" | bc)")"
    for delay in 0 0.25 0.5 1 2 3; do
      sleep "$delay"
      ns=$("$work/cost" "$nccl" 20000 | sed -n 's/.*allreduce_ns \([0-9.]*\).*/\1/p')
      line="$line after_$(printf %.2f "$(echo "$(now) - $t1" | bc)")s ${ns:-?}"
    done
    echo "$line"
  done
done
