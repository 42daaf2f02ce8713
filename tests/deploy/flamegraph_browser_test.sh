#!/usr/bin/env bash
# Records a gpuflame profile of a real Python process (simulated CUDA
# runtime: a fixture), then has headless Chromium render it in Grafana's own
# flame graph component (flamegraph_browser_test.mjs) and saves a screenshot.
# Usage: flamegraph_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
source "$(dirname "$0")/browser_test_preamble.sh" "$@"
record_workload "$out/profile" features.py
GPUFLAME_EXPECT_ROWS='[["GPUModelRunner > _allocate_kv_cache_tensors", "64 MiB"],
                       ["c10::cuda::CUDACachingAllocator::malloc", "82 MiB"]]' \
  node "$here/flamegraph_browser_test.mjs" "$out/profile/torch_memory.inuse_space.folded" bytes \
  "$out/grafana-flamegraph.png"
