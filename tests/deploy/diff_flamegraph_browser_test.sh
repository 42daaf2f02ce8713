#!/usr/bin/env bash
# Records tests/workloads/diff_runs.py twice (as base, then as new; simulated
# CUDA runtime: a fixture), diffs the two with `gpuflame diff`, then has
# headless Chromium use the diff flame graph and the plain one
# (diff_flamegraph_browser_test.mjs) and saves a screenshot; and the page of a
# diff whose sides' sample types differ.
# Usage: diff_flamegraph_browser_test.sh GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR
source "$(dirname "$0")/browser_test_preamble.sh" "$@"
rm -rf "$out/diff-runs" && mkdir -p "$out/diff-runs"
for variant in base new; do
  record_workload "$out/diff-runs/$variant" diff_runs.py "$variant"
done
"$bin" diff -q "$out/diff-runs/base" "$out/diff-runs/new" -o "$out/diff-runs/diff"
# A device-memory profile of an older gpuflame (no peak_*, unused_*) against
# NEW's: diffed in the types both have, the rest said at the top of the page.
"$bin" diff -q "$here/../fuzz/corpus/pprof_symbolize/othersig-gpu_memory.pb.gz" \
  "$out/diff-runs/new/gpu_memory.pb.gz" -o "$out/diff-runs/partial" 2>/dev/null
node "$here/diff_flamegraph_browser_test.mjs" "$out/diff-runs/diff/diff_flamegraph.html" \
  "$out/diff-runs/new/flamegraph.html" "$out/diff-flamegraph.png" "$out/diff-runs/partial/diff_flamegraph.html"
