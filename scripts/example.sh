#!/usr/bin/env bash
# Builds gpuflame and records the bundled example, an LLM-serving-shaped
# program (KV-cache preallocation, weights, a decode loop). With PyTorch and a
# GPU it uses them; otherwise it runs on the simulated CUDA runtime (a test
# fixture: no GPU involved). Then shows the flame graph it wrote.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
out=${1:-$root/out/example}
py=${PYTHON:-python3}
export GPUFLAME_SIM_LIB_DIR=$root/build/cuda_sim
export PYTHONPATH=$root/build/cuda_sim${PYTHONPATH:+:$PYTHONPATH}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -E"
$SUDO "$root/build/gpuflame" record -o "$out" -- "$py" "$root/examples/serving_demo.py"
echo
"$py" "$root/examples/show_flamegraph.py" "$out"
