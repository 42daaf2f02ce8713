#!/usr/bin/env bash
# Records tests/workloads/idle.py starved (simulated CUDA runtime, CUPTI and
# NVML: fixtures), then has headless Chromium read the flame graph page's
# "why is the GPU idle" section (utilization_browser_test.mjs) and saves a
# screenshot.
# Usage: utilization_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
source "$(dirname "$0")/browser_test_preamble.sh" "$@"
GPUFLAME_NVML_LIBRARY=$sim/libnvidia-ml.so.1 record_workload "$out/utilization-run" idle.py starved 2
node "$here/utilization_browser_test.mjs" "$out/utilization-run/flamegraph.html" \
    "$out/utilization-run/summary.json" "$out/utilization.png"
