#!/usr/bin/env bash
# The injection library's per-event parts on the GPU host's own CPU, where
# the step-time runs are measured: bench/tensor_hook_benchmark.cc (the
# allocator hook per event, outside-timed against no hook, beside the hook's
# own estimate of itself, which /metrics and the overhead budget use) and
# bench/launch_callback_benchmark.cc (the CUPTI callbacks per launch, closed
# and in a launch window), each warm (0 KiB touched between events) and
# with the cache pollution of a training step's work between two events
# (POLLUTE_KIB, default "64 256": KiB touched between two events). On the simulated CUDA libraries the bundle
# carries (scripts/gpu-bundle.sh): the real ones' dispatch is not ours to
# time, and these numbers are ours alone. ROUNDS (5); EVENTS, the hook
# benchmark's events a round (its default, 200,000: at a few MiB touched
# between events, a round of that takes minutes).
GF_OUT_SUFFIX=/host-benchmarks . "$(dirname "$0")/common.sh"
export GPUFLAME_SIM_DIR=$bundle/bench/sim
# Before the host's own: the real driver's libcuda.so.1 would be found first.
export LD_LIBRARY_PATH=$GPUFLAME_SIM_DIR:$LD_LIBRARY_PATH
lscpu | grep -m1 "Model name" || true
# With an earlier build's hook benchmark in $bundle/bench/old/ (a before and
# after), the two run in turn, twice.
for kib in 0 ${POLLUTE_KIB:-64 256}; do
  for build in "" old/ "" old/; do
    [ -x "$bundle/bench/${build}gpuflame_tensor_hook_benchmark" ] || continue
    echo "-- tensor hook benchmark: ${build:-this build}"
    "$bundle/bench/${build}gpuflame_tensor_hook_benchmark" --rounds "${ROUNDS:-5}" --pollute-kib "$kib" \
        ${EVENTS:+--events "$EVENTS"} || status=1
    [ -d "$bundle/bench/old" ] || break
  done
  "$bundle/bench/gpuflame_launch_callback_benchmark" --rounds "${ROUNDS:-5}" --pollute-kib "$kib" \
      --library "$bundle/libgpuflame_cupti.so" || status=1
done
exit $status
