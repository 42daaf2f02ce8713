#!/usr/bin/env bash
# Records tests/workloads/viewer.py (a helper process beside it; simulated
# CUDA runtime: a fixture) and a command that allocates nothing, then has
# headless Chromium use gpuflame's own flame graph page on both
# (flamegraph_page_browser_test.mjs) and saves screenshots, light and dark.
# Usage: flamegraph_page_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
source "$(dirname "$0")/browser_test_preamble.sh" "$@"
record_workload "$out/viewer-run" viewer.py
rm -rf "$out/viewer-empty"
"$bin" record -q -o "$out/viewer-empty" -- "$py" -c "pass"
node "$here/flamegraph_page_browser_test.mjs" "$out/viewer-run/flamegraph.html" "$out/viewer-empty/flamegraph.html" \
  "$workloads/viewer.py" "$out/flamegraph-page"
