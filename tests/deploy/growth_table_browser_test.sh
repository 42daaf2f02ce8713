#!/usr/bin/env bash
# Records tests/workloads/leak.py (simulated CUDA runtime: a fixture), then
# has headless Chromium use the flame graph page's table of growing stacks
# (growth_table_browser_test.mjs) and saves a screenshot.
# Usage: growth_table_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 sim=$2 workloads=$3 py=$4 out=$5
if [ ! -d "$here/node_modules/playwright-core" ]; then
  echo "tests/deploy/node_modules is missing: run ./scripts/install-deps.sh" >&2
  exit 1
fi
rm -rf "$out/growth-run" && mkdir -p "$out"
GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim "$bin" record -q -o "$out/growth-run" -- "$py" "$workloads/leak.py"
node "$here/growth_table_browser_test.mjs" "$out/growth-run/flamegraph.html" "$out/growth-table.png"
