#!/usr/bin/env bash
# Step-time cost of gpuflame's modes on a real training loop (issue 11), on the
# H200 `device` machine with the bundle from scripts/gpu-bundle.sh in .carry/.
# Environment: MODEL (launch|large), ROUNDS, MODES, STEPS, WARMUP, WORKLOAD_CPUS,
# GPUFLAME_CPUS (taskset lists), TIME_BUDGET
# (seconds; the device allows 600 per command). The table goes to stdout,
# every raw per-round result to $OUT/step_overhead-$MODEL.json.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${OUT:-/tmp/gpuflame-gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
echo "== host: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(nproc) CPUs"
args=(--gpuflame "$root/.carry/gpuflame" --python "$py" --model "${MODEL:-launch}"
      --rounds "${ROUNDS:-6}" --time-budget "${TIME_BUDGET:-500}" --out "$out")
# Unset: the driver's and the workload's defaults (per model).
[ -n "${MODES:-}" ] && args+=(--modes "$MODES")
[ -n "${STEPS:-}" ] && args+=(--steps "$STEPS")
[ -n "${WARMUP:-}" ] && args+=(--warmup "$WARMUP")
[ -n "${WORKLOAD_CPUS:-}" ] && args+=(--workload-cpus "$WORKLOAD_CPUS")
[ -n "${GPUFLAME_CPUS:-}" ] && args+=(--gpuflame-cpus "$GPUFLAME_CPUS")
exec "$py" "$here/step_overhead.py" "${args[@]}"
