#!/usr/bin/env bash
# Records tests/workloads/diff_runs.py twice (as base, then as new; simulated
# CUDA runtime: a fixture), diffs the two with `gpuflame diff`, then has
# headless Chromium use the diff flame graph and the plain one
# (diff_flamegraph_browser_test.mjs) and saves a screenshot.
# Usage: diff_flamegraph_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 sim=$2 workloads=$3 py=$4 out=$5
if [ ! -d "$here/node_modules/playwright-core" ]; then
  echo "tests/deploy/node_modules is missing: run ./scripts/install-deps.sh" >&2
  exit 1
fi
rm -rf "$out/diff-runs" && mkdir -p "$out/diff-runs"
for variant in base new; do
  GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim "$bin" record -q -o "$out/diff-runs/$variant" -- \
    "$py" "$workloads/diff_runs.py" "$variant"
done
"$bin" diff -q "$out/diff-runs/base" "$out/diff-runs/new" -o "$out/diff-runs/diff"
node "$here/diff_flamegraph_browser_test.mjs" "$out/diff-runs/diff/diff_flamegraph.html" \
  "$out/diff-runs/new/flamegraph.html" "$out/diff-flamegraph.png"
