#!/usr/bin/env bash
# Builds gpuflame and records the bundled example, an LLM-serving-shaped
# program (KV-cache preallocation, weights, a decode loop). With PyTorch and a
# GPU it uses them; otherwise it runs on the simulated CUDA runtime (a test
# fixture: no GPU involved). Then shows the flame graph it wrote.
# Builds only what the example runs (no tests), showing the compiler's
# progress: the first build takes a few minutes on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
echo "gpuflame: building gpuflame, its injection library and the simulated CUDA runtime into build/" >&2
# The simulated PyTorch's libraries (sim_torch.py loads them) bring the
# simulated runtime and driver they link with.
"$root/scripts/build.sh" gpuflame gpuflame_cupti gf_sim_c10_cuda gf_sim_torch_python
out=${1:-$root/out/example}
py=${PYTHON:-python3}
export GPUFLAME_SIM_LIB_DIR=$root/build/cuda_sim
export PYTHONPATH=$root/build/cuda_sim${PYTHONPATH:+:$PYTHONPATH}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -E"
echo
$SUDO "$root/build/gpuflame" record -o "$out" -- "$py" "$root/examples/serving_demo.py"
echo
"$py" "$root/examples/show_flamegraph.py" "$out"
