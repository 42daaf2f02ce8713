#!/usr/bin/env bash
# Records a timeline of a real Python process (simulated CUDA runtime and
# CUPTI: a fixture) with `record --timeline`, then has speedscope, a reader
# we did not write, import it in headless Chromium (timeline_browser_test.mjs)
# and checks what it shows; saves a screenshot.
# Usage: timeline_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
source "$(dirname "$0")/browser_test_preamble.sh" "$@"
if [ ! -d "$here/node_modules/speedscope" ]; then
  echo "tests/deploy/node_modules is missing speedscope: run ./scripts/install-deps.sh --tests" >&2
  exit 1
fi
rm -rf "$out/timeline"
GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim "$bin" record -q \
  --mark 'Trainer > step' --mark 'DataLoader > __next__' -o "$out/timeline" -- "$py" "$workloads/timeline.py"
node "$here/timeline_browser_test.mjs" "$out/timeline/timeline.json.gz" "$out/speedscope-timeline.png"
