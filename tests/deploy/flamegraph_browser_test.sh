#!/usr/bin/env bash
# Records a gpuflame profile of a real Python process (simulated CUDA
# runtime: a fixture), then has headless Chromium render it in Grafana's own
# flame graph component (flamegraph_browser_test.mjs) and saves a screenshot.
# Usage: flamegraph_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 sim=$2 workloads=$3 py=$4 out=$5
if [ ! -d "$here/node_modules/@grafana/flamegraph" ]; then
  echo "tests/deploy/node_modules is missing: run ./scripts/install-deps.sh" >&2
  exit 1
fi
rm -rf "$out/profile" && mkdir -p "$out"
GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim "$bin" record -q -o "$out/profile" -- "$py" "$workloads/features.py"
GPUFLAME_EXPECT_ROWS='[["GPUModelRunner > _allocate_kv_cache_tensors", "64 MiB"],
                       ["c10::cuda::CUDACachingAllocator::malloc", "82 MiB"]]' \
  node "$here/flamegraph_browser_test.mjs" "$out/profile/torch_memory.inuse_space.folded" bytes \
  "$out/grafana-flamegraph.png"
