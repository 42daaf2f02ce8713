#!/usr/bin/env bash
# What each part of kernel time costs a launch-bound training step (issue 11,
# item 5), on the H200 `device` machine with the bundle from
# scripts/gpu-bundle.sh in .carry/: tests/gpu/step_overhead.py's interleaved
# separate processes, one mode per part switched off or retuned
# (cupti/activity_tuning.h's GPUFLAME_CUPTI_* knobs, kernel_time_cupti.cc's
# diagnostics), against plain runs, record without kernel time, and
# torch.profiler (CUPTI driven by Kineto: what CUPTI itself costs).
# "steady" modes set GPUFLAME_STARTUP_S=0: the timed steps of the launch
# model end within 5 s of cuInit, where every launch is traced whole (the
# start-up rule), and a continuous profiler's cost is the steady state's.
# MODEL=kernels (train_bench.py: 500 single-kernel ops a step, no
# allocation) gives each mode's cost per kernel launch: its added step time
# over 500, with far less spread between processes than a training step's.
# Environment: ROUNDS (3), TIME_BUDGET (520), MODES (the list below), and
# run_step_overhead.sh's (MODEL, WORKLOAD_CPUS, GPUFLAME_CPUS, STEPS).
here=$(cd "$(dirname "$0")" && pwd)
S=GPUFLAME_STARTUP_S=0
default_modes="plain,record,no-kernel=--no-kernel-time,steady=$S"
default_modes+=",activity-only=$S GPUFLAME_LAUNCH_CALLBACKS=0,callbacks-only=$S GPUFLAME_ACTIVITY=0"
default_modes+=",kernel-kind-only=$S GPUFLAME_CUPTI_KINDS=kernel,pinned=$S GPUFLAME_CUPTI_PINNED=1"
default_modes+=",big-buffers=$S GPUFLAME_CUPTI_BUFFER_KB=16384 GPUFLAME_CUPTI_DEVICE_BUFFER_MB=64 GPUFLAME_CUPTI_ZEROED=1"
default_modes+=",torch-profiler,history-python"
export MODES=${MODES:-$default_modes} ROUNDS=${ROUNDS:-3} TIME_BUDGET=${TIME_BUDGET:-520}
exec "$here/run_step_overhead.sh"
