#!/usr/bin/env bash
# Where the event rate outruns gpuflame on this machine: `record` over
# PROCS processes of tests/workloads/burst.py, each with THREADS threads
# allocating (cudaMalloc, three in four freed) as fast as the simulated
# CUDA runtime (a test fixture) lets them. For each shape it prints the
# allocation and free rate reached, the records BPF could not put in the
# ring (charged to "[lost: ring buffer full]"), the device-level stack
# copies skipped under ring pressure (those allocations keep their Python
# frames), and whether gpu_memory's in-use total is still exact.
#
#   bench/ring_loss.sh GPUFLAME_BIN SIM_DIR [SHAPES] [ALLOCS] [RING_KB] [PYTHON]
#
# SHAPES: PROCSxTHREADS list ("1x1 1x4 1x16 4x4"); ALLOCS per process
# (20000); RING_KB (16384, the default ring). Root (eBPF), python3.
set -euo pipefail
bin=$1 sim=$2 shapes=${3:-"1x1 1x4 1x16 4x4"} allocs=${4:-20000} ring_kb=${5:-16384}
python=${6:-$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 2>/dev/null | head -1)}
here=$(cd "$(dirname "$0")" && pwd)
burst=$here/../tests/workloads/burst.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-7s %9s %12s %10s %10s %14s %9s\n' shape seconds "allocs+frees/s" lost lost% "stacks skipped" in_use
for shape in $shapes; do
  procs=${shape%x*} threads=${shape#*x}
  rm -rf "$out/rec"
  start=$(date +%s%N)
  GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim "$bin" record -q --cpu-hz 0 --no-kernel-time --ring-buffer-kb "$ring_kb" \
    -o "$out/rec" -- sh -c "for i in \$(seq $procs); do $python $burst $threads $((allocs / threads)) > $out/expect.\$i & done; wait"
  end=$(date +%s%N)
  python3 - "$out" "$procs" "$(( (end - start) / 1000000 ))" "$shape" <<'PY'
import json, sys
out, procs, ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = json.load(open(out + "/rec/summary.json"))
want = sum(json.load(open("%s/expect.%d" % (out, i)))["in_use"] for i in range(1, procs + 1))
have = sum(int(l.rsplit(" ", 1)[1]) for l in open(out + "/rec/gpu_memory.inuse_space.folded"))
calls = d["events"]["allocs"] + d["events"]["frees"] + d["events"]["lost_allocs_kept"] + d["events"]["lost_frees_kept"]
records = d["bpf"]["events"] + d["bpf"]["ringbuf_full_drops"]
print("%-7s %9.2f %12.0f %10d %9.1f%% %14d %9s" % (
    sys.argv[4], ms / 1000, calls / (ms / 1000), d["bpf"]["ringbuf_full_drops"],
    100.0 * d["bpf"]["ringbuf_full_drops"] / max(records, 1), d["bpf"]["native_stacks_skipped_ring_pressure"],
    "exact" if have == want else "%+d" % (have - want)))
PY
done
