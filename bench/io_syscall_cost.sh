#!/bin/bash
# The timeline's I/O hooks' cost per syscall (bpf/io_calls.bpf.h), as
# io_syscall_cost.c measures it, in four settings, ROUNDS times each
# (interleaved, so that the machine's drift falls on all of them):
#   bare      no gpuflame running
#   record    its command under `gpuflame record` (no timeline: hooks not loaded)
#   timeline  its command under `gpuflame record --timeline` (followed: hooks on)
#   beside    a process not followed, while `record --timeline` records another
#             (what every other process of the machine pays)
# Prints each run's line and, per setting and figure, the range over the
# rounds. Needs root. Usage: bench/io_syscall_cost.sh [BUILD_DIR] [ROUNDS] [N];
# COST_BIN: a prebuilt io_syscall_cost (a host without a compiler).
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
n=${3:-200000}
gpuflame=$build/gpuflame
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${COST_BIN:-}" ]; then cp "$COST_BIN" "$work/cost"; else cc -O2 -o "$work/cost" "$(dirname "$0")/io_syscall_cost.c"; fi
head -c $((1 << 20)) /dev/urandom >"$work/file"
"$work/cost" "$work/file" 1000 >/dev/null  # page cache warm
for ((r = 0; r < rounds; r++)); do
  echo "bare $("$work/cost" "$work/file" "$n")"
  echo "record $("$gpuflame" record -q --cpu-hz 0 -o "$work/rec" -- "$work/cost" "$work/file" "$n" | grep pread)"
  echo "timeline $("$gpuflame" record -q --cpu-hz 0 --timeline --timeline-io-max 4294967295 -o "$work/tl" -- \
    "$work/cost" "$work/file" "$n" | grep pread)"
  # The programs' own run time (BPF_ENABLE_STATS), over every syscall of the
  # machine while loaded: robust to a loaded machine, unlike wall time.
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); p=s["self_cost"]["programs"]; io=s["timeline"]["io"]
print("bpf", " ".join("%s_ns_per_hit %s %s_hits %d" % (k, p[k]["ns_per_hit"], k, p[k]["hits"]) for k in ("io_enter", "io_exit")),
      "sent", io["sent"], "small_not_sent", io["small_reads_not_sent"])' "$work/tl/summary.json" >&2
  # Beside: the recording follows a sleeper; this process is not followed.
  "$gpuflame" record -q --cpu-hz 0 --timeline -o "$work/beside" -- sleep 30 >/dev/null 2>&1 &
  rec=$!
  sleep 3
  echo "beside $("$work/cost" "$work/file" "$n")"
  kill -INT $rec
  wait $rec || true
done | tee "$work/runs"
echo "ranges over $rounds rounds (ns per call, min..max):"
awk '{ for (i = 2; i < NF; i += 2) { k = $1 " " $i; v = $(i + 1);
         if (!(k in lo) || v < lo[k]) lo[k] = v; if (!(k in hi) || v > hi[k]) hi[k] = v } }
     END { for (k in lo) print k, lo[k] ".." hi[k] }' "$work/runs" | sort
