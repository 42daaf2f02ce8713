#!/usr/bin/env bash
# Records tests/workloads/diff_runs.py twice (as base, then as new; simulated
# CUDA runtime: a fixture), diffs the two with `gpuflame diff`, then has
# headless Chromium use the diff flame graph and the plain one
# (diff_flamegraph_browser_test.mjs) and saves a screenshot; and the page of a
# diff whose sides' sample types differ.
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
# A device-memory profile of an older gpuflame (no peak_*, unused_*) against
# NEW's: diffed in the types both have, the rest said at the top of the page.
"$bin" diff -q "$here/../fuzz/corpus/pprof_symbolize/othersig-gpu_memory.pb.gz" \
  "$out/diff-runs/new/gpu_memory.pb.gz" -o "$out/diff-runs/partial" 2>/dev/null
node "$here/diff_flamegraph_browser_test.mjs" "$out/diff-runs/diff/diff_flamegraph.html" \
  "$out/diff-runs/new/flamegraph.html" "$out/diff-flamegraph.png" "$out/diff-runs/partial/diff_flamegraph.html"
