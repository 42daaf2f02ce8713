#!/usr/bin/env bash
# Runs `record` on train_bench.py's kernel loop again and again, within
# TIME_BUDGET seconds, under the crash reporter (segv_backtrace.c, built
# into .carry/ by scripts/gpu-bundle.sh) and Python's faulthandler, and
# prints the stderr of every run that did not exit 0. MODES: space-separated
# environment settings, one per run in turn ("-" for none). For a crash seen
# once on the device (rc 139 in the callbacks-only mode of
# run_kernel_breakdown.sh): where, and whether the default mode has it too.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
budget=${TIME_BUDGET:-280}
modes=${MODES:-"GPUFLAME_STARTUP_S=0,GPUFLAME_ACTIVITY=0 GPUFLAME_STARTUP_S=0"}
start=$SECONDS
runs=0 failed=0
while [ $((SECONDS - start)) -lt "$budget" ]; do
  for m in $modes; do
    env_args=()
    [ "$m" != "-" ] && IFS=, read -ra env_args <<<"$m"
    out=$(mktemp -d)
    err=$(env "${env_args[@]}" PYTHONFAULTHANDLER=1 LD_PRELOAD="$root/.carry/libsegv_backtrace.so" \
      "$root/.carry/gpuflame" record -q -o "$out" -- python3 "$here/train_bench.py" --model kernels --steps 400 \
      2>&1 >/dev/null)
    rc=$?
    runs=$((runs + 1))
    if [ $rc -ne 0 ]; then
      failed=$((failed + 1))
      echo "== run $runs ($m): rc $rc"
      echo "$err" | tail -60
    fi
    rm -rf "$out"
  done
done
echo "== $runs runs, $failed failed"
