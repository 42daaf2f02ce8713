#!/usr/bin/env bash
# Records tests/workloads/leak.py (simulated CUDA runtime: a fixture), then
# has headless Chromium use the flame graph page's table of growing stacks
# (growth_table_browser_test.mjs) and saves a screenshot.
# Usage: growth_table_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
source "$(dirname "$0")/browser_test_preamble.sh" "$@"
record_workload "$out/growth-run" leak.py
node "$here/growth_table_browser_test.mjs" "$out/growth-run/flamegraph.html" "$out/growth-table.png"
