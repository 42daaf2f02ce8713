#!/usr/bin/env bash
# What a process pays for CUPTI's launch callbacks being on, whoever asked:
# gpuflame enables them once, when an agent first listens, and leaves them
# on for the process's life (switching them crashes CUPTI: README, "The
# crash was CUPTI's"), so each launch goes through CUPTI's dispatch even
# while the gate is closed and after the agent has left. That dispatch is
# CUPTI's, not ours to time: the library's own figure cannot hold it.
# Separate processes of the launch-bound GPT (tests/gpu/train_bench.py),
# alternated, ROUNDS times:
#   plain     no CUPTI client;
#   subscribe cupti_toggle.c subscribed, nothing enabled;
#   cupti     cupti_toggle.c with TOGGLE_WHAT=stack-sites: the callbacks
#             gpuflame enables for good (the driver's launches, the
#             runtime's copies and memsets) on from the start, a callback
#             that only counts, no activity, no gpuflame: CUPTI's dispatch
#             alone;
#   driver    cupti_toggle.c with the driver's launches alone on;
#   off-disable, off-unsubscribe, off-finalize
#             as cupti, then undone once, by that means, some 130 warm-up
#             steps in (before the steps measured): whether the cost leaves
#             with the callbacks, as it must for an agent's leaving to end it;
#   activity-once
#             cupti_toggle.c with kernel, copy and memset activity on for
#             the first 3 s (start-up and warm-up) and then off, no
#             callbacks: whether activity leaves a cost behind it (PyTorch
#             saw steps slower after its profiler ended: pytorch#144455);
#   library   libgpuflame_cupti.so injected and no agent: what the library
#             costs while nobody listens (callbacks not yet enabled; the
#             launch route's records primed at its start);
#   kernel-activity
#             api_records.c with API_RECORDS=none: kernel activity on for
#             good, no callbacks, no API records;
#   records   api_records.c with API_RECORDS=driver: the same and the
#             driver's launch records on for good, what the launch route
#             turns on in its windows (against kernel-activity: their cost).
# Prints each run's median step (of its later half) and each mode's ratio to plain in its round
# ("nan" where a run failed: its .err under $OUT says why).
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   ROUNDS (2), STEPS (1200), MODES (all of the above, in that order; the
#   first is each round's baseline, so plain comes first), MODEL (launch;
#   kernels: a step of 500 in-place adds on 4096 floats, nothing but
#   launches, for CUPTI's dispatch per launch: ms a step / 500)
GF_OUT_SUFFIX=/cupti-callback-cost . "$(dirname "$0")/common.sh"
steps=${STEPS:-1200}
modes=${MODES:-plain subscribe cupti driver off-disable off-unsubscribe off-finalize activity-once library kernel-activity records}
run() {  # mode round
  local env=()
  case $1 in
    subscribe) env=(CUDA_INJECTION64_PATH="$bundle/libcupti_toggle.so" TOGGLE_WHAT=subscribe) ;;
    cupti) env=(CUDA_INJECTION64_PATH="$bundle/libcupti_toggle.so" TOGGLE_WHAT=stack-sites) ;;
    driver) env=(CUDA_INJECTION64_PATH="$bundle/libcupti_toggle.so" TOGGLE_WHAT=driver-launches) ;;
    # Each launch is two callbacks (enter, exit), some 570 launches a step.
    off-*) env=(CUDA_INJECTION64_PATH="$bundle/libcupti_toggle.so" TOGGLE_WHAT=stack-sites
                TOGGLE_OFF_AFTER_CALLS=150000 TOGGLE_OFF_HOW="${1#off-}") ;;
    activity-once) env=(CUDA_INJECTION64_PATH="$bundle/libcupti_toggle.so" TOGGLE_WHAT=activity-once) ;;
    library) env=(CUDA_INJECTION64_PATH="$bundle/libgpuflame_cupti.so") ;;
    kernel-activity) env=(CUDA_INJECTION64_PATH="$bundle/libapi_records.so" API_RECORDS=none) ;;
    records) env=(CUDA_INJECTION64_PATH="$bundle/libapi_records.so" API_RECORDS=driver) ;;
  esac
  env "${env[@]}" timeout 120 "$py" "$here/train_bench.py" --model "${MODEL:-launch}" --warmup 200 --steps "$steps" \
      --step-log "$out/$1-$2.steps" > "$out/$1-$2.json" 2> "$out/$1-$2.err"
  later_half_median "$out/$1-$2.steps"
}
# shellcheck disable=SC2086  # the modes are words
SAY_PATTERN="cupti_toggle: [0-9]" rounds_of_modes run $modes
exit 0
