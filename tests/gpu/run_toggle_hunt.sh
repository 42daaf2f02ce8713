#!/usr/bin/env bash
# Crash hunt, parallel: train_bench.py's kernel loop run again and again, P
# at a time, for SECONDS_A under cupti_toggle.c alone (what TOGGLE_WHAT names
# switched every TOGGLE_US: CUPTI's launch callbacks by default, or activity,
# or nothing as the control; no gpuflame), then for SECONDS_B under
# `gpuflame record` in the callbacks-only mode (GPUFLAME_ACTIVITY=0) with the
# launch duty cycle at one tick in 2 (5 times the switches of the default).
# Every run carries the crash reporter. Output: $OUT/phase_*.log.
. "$(dirname "$0")/common.sh"
P=${P:-8}
SECONDS_A=${SECONDS_A:-150}
SECONDS_B=${SECONDS_B:-200}
cc -O1 -g -shared -fPIC -I/usr/local/cuda/include -o /tmp/libcupti_toggle.so "$here/cupti_toggle.c" -ldl -lpthread \
  2>/dev/null || cp "$bundle/libcupti_toggle.so" /tmp/libcupti_toggle.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])'

worker() {  # phase, worker id, seconds, command...
  local phase=$1 id=$2 secs=$3
  shift 3
  local start=$SECONDS n=0 log=/tmp/hunt_${phase}_$id.log
  : >"$log"
  while [ $((SECONDS - start)) -lt "$secs" ]; do
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    n=$((n + 1))
    if [ $rc -ne 0 ] || echo "$err" | grep -q "segv_backtrace\|Fatal Python"; then
      { echo "== $phase worker $id run $n: rc $rc"; echo "$err" | tail -80; } >>"$log"
    else
      echo "$err" | grep "cupti_toggle: [0-9]" | head -1 | sed "s/^/  ok run $n: /" >>"$log"
    fi
  done
  echo "== $phase worker $id: $n runs" >>"$log"
}

common_env=(PYTHONFAULTHANDLER=1 LD_PRELOAD=$bundle/libsegv_backtrace.so)
bench=(python3 "$here/train_bench.py" --model kernels --steps 400)

what=${TOGGLE_WHAT:-callbacks}
echo "== phase A: cupti_toggle.so alone, TOGGLE_WHAT=$what TOGGLE_US=${TOGGLE_US:-500}, $P at a time, ${SECONDS_A}s"
for i in $(seq 1 "$P"); do
  worker A "$i" "$SECONDS_A" env "${common_env[@]}" CUDA_INJECTION64_PATH=/tmp/libcupti_toggle.so \
    TOGGLE_WHAT="$what" TOGGLE_US="${TOGGLE_US:-500}" "${bench[@]}" &
done
wait
cat /tmp/hunt_A_*.log >"$out/phase_A_$what.log"
rm -f /tmp/hunt_A_*.log
grep -h "^== A worker" "$out/phase_A_$what.log"
echo "failed runs (crashed or raised): $(grep -c "^== A worker .* rc " "$out/phase_A_$what.log")"
[ "$SECONDS_B" -gt 0 ] || exit 0

PB=${PB:-4}
echo "== phase B: record, GPUFLAME_ACTIVITY=0 GPUFLAME_STARTUP_S=0 GPUFLAME_LAUNCH_ONE_IN=2, $PB at a time, ${SECONDS_B}s"
record_once() {  # a fresh output folder per run, as run_crash_hunt.sh's
  local d rc
  d=$(mktemp -d)
  env "${common_env[@]}" GPUFLAME_ACTIVITY=0 GPUFLAME_STARTUP_S=0 GPUFLAME_LAUNCH_ONE_IN=2 \
    "$bundle/gpuflame" record -q -o "$d" -- "${bench[@]}"
  rc=$?
  rm -rf "$d"
  return $rc
}
for i in $(seq 1 "$PB"); do
  worker B "$i" "$SECONDS_B" record_once &
done
wait
cat /tmp/hunt_B_*.log >"$out/phase_B.log"
grep -h "^== B worker" "$out/phase_B.log"; grep -c "rc 139" "$out/phase_B.log"
exit 0
