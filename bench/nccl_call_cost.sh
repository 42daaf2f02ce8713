#!/bin/bash
# record's cost per NCCL call (bpf/nccl_calls.bpf.h: a uprobe and a return
# probe on each API), as nccl_call_cost.c measures it on the simulated
# libnccl.so.2 (one rank: no call waits), in three settings, ROUNDS times
# each (interleaved, so that the machine's drift falls on all of them):
#   bare      no gpuflame running
#   record    its command under `gpuflame record`
#   timeline  its command under `gpuflame record --timeline` (each call a span)
# Prints each run's line, the probes' own run time per hit (BPF_ENABLE_STATS,
# robust to a loaded machine, unlike wall time) and, per setting and figure,
# the range over the rounds. Needs root.
# Usage: bench/nccl_call_cost.sh [BUILD_DIR] [ROUNDS] [N]; COST_BIN and
# NCCL_LIB: a prebuilt nccl_call_cost and library (a host without a compiler).
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
n=${3:-100000}
gpuflame=$build/gpuflame
nccl=${NCCL_LIB:-$(cd "$build/cuda_sim" && pwd)/libnccl.so.2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GF_SIM_NCCL_DIR=$work  # the simulated communicator's shared file
if [ -n "${COST_BIN:-}" ]; then cp "$COST_BIN" "$work/cost"; else cc -O2 -o "$work/cost" "$(dirname "$0")/nccl_call_cost.c" -ldl; fi
bpf() {
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["self_cost"]["programs"]
print("bpf", " ".join("%s_ns_per_hit %s" % (k, p[k]["ns_per_hit"]) for k in ("nccl_enter", "nccl_exit")))' "$1" >&2
}
for ((r = 0; r < rounds; r++)); do
  # The kernel unregisters an exited gpuflame's uprobes a moment later (a
  # process started at once still traps): bare waits them out.
  sleep 3
  echo "bare $("$work/cost" "$nccl" "$n")"
  echo "record $("$gpuflame" record -q --cpu-hz 0 -o "$work/rec" -- "$work/cost" "$nccl" "$n")"
  bpf "$work/rec/summary.json"
  echo "timeline $("$gpuflame" record -q --cpu-hz 0 --timeline -o "$work/tl" -- "$work/cost" "$nccl" "$n")"
  bpf "$work/tl/summary.json"
done | tee "$work/runs"
echo "ranges over $rounds rounds (ns per call, min..max):"
awk '{ for (i = 2; i < NF; i += 2) { k = $1 " " $i; v = $(i + 1);
         if (!(k in lo) || v < lo[k]) lo[k] = v; if (!(k in hi) || v > hi[k]) hi[k] = v } }
     END { for (k in lo) print k, lo[k] ".." hi[k] }' "$work/runs" | sort
