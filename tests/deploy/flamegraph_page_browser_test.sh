#!/usr/bin/env bash
# Records tests/workloads/viewer.py (a helper process beside it; simulated
# CUDA runtime: a fixture) and a command that allocates nothing, then has
# headless Chromium use gpuflame's own flame graph page on both
# (flamegraph_page_browser_test.mjs) and saves screenshots, light and dark.
# Usage: flamegraph_page_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 sim=$2 workloads=$3 py=$4 out=$5
if [ ! -d "$here/node_modules/playwright-core" ]; then
  echo "tests/deploy/node_modules is missing: run ./scripts/install-deps.sh" >&2
  exit 1
fi
rm -rf "$out/viewer-run" "$out/viewer-empty" && mkdir -p "$out"
GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim "$bin" record -q -o "$out/viewer-run" -- "$py" "$workloads/viewer.py"
"$bin" record -q -o "$out/viewer-empty" -- "$py" -c "pass"
node "$here/flamegraph_page_browser_test.mjs" "$out/viewer-run/flamegraph.html" "$out/viewer-empty/flamegraph.html" \
  "$workloads/viewer.py" "$out/flamegraph-page"
