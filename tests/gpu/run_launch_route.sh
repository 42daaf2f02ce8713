#!/usr/bin/env bash
# Launch stacks without CUPTI's callbacks, checked before it is built: a
# uprobe on libcuda's exported launch entry points gives the launching
# thread (and would give its stack), CUPTI's API activity records of the
# driver's launch calls give the same thread, the call's time and the
# correlation ID its kernels carry; joined by thread and time. Activity
# switches safely while launches run (README, "The crash was CUPTI's") and
# uprobes come and go in the kernel, so both could be on in windows only,
# where the callbacks' dispatch stays for the process's life.
# Separate processes of the launch-bound GPT (tests/gpu/train_bench.py),
# alternated, ROUNDS times:
#   plain     nothing attached;
#   kernels   kernel activity on (tests/gpu/api_records.c, API_RECORDS=none);
#   records   kernel activity and the driver's launch calls' API records;
#   uprobes   counting uprobes on libcuda's launch entry points
#             (bench/launch_uprobes.cc), no CUPTI: the trap alone;
#   route     records and uprobes that record each hit, joined after the
#             run (tests/gpu/join_launches.py): whether the runtime's
#             launches pass through the exported entry points, and what
#             share of kernels would get a stack;
#   callbacks for comparison, CUPTI's dispatch to the callbacks gpuflame
#             enables for good today (cupti_toggle.c TOGGLE_WHAT=stack-sites).
# Prints each run's median step (of its later half) and each mode's ratio to
# plain in its round, and each route run's join as it ends.
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   ROUNDS (2), STEPS (1000), MODES (plain kernels records uprobes route callbacks)
GF_OUT_SUFFIX=/launch-route . "$(dirname "$0")/common.sh"
steps=${STEPS:-1000}
modes=${MODES:-plain kernels records uprobes route callbacks}
libcuda=$(env -u LD_LIBRARY_PATH "$py" -c 'import ctypes, os; ctypes.CDLL("libcuda.so.1")
print(os.path.realpath(next(l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l)))')
echo "libcuda: $libcuda"
tmp=$(mktemp -d)
# Each run's uprobes start and stop inside its own $(...) (rounds_of_modes):
# a run the caller's limit cuts short leaves its pid here, for this shell's
# exit to stop (they are machine-wide).
trap 'kill "$(cat "$tmp/uprobes.pid" 2>/dev/null)" 2>/dev/null; rm -rf "$tmp"' EXIT
uprobes_pid=
start_uprobes() {  # [--out FILE]
  rm -f "$tmp/ready"
  "$bundle/bench/gpuflame_launch_uprobes" --lib "$libcuda" --ready "$tmp/ready" "$@" > "$tmp/uprobes.txt" 2> "$tmp/uprobes.err" &
  uprobes_pid=$!
  echo "$uprobes_pid" > "$tmp/uprobes.pid"
  for _ in $(seq 100); do [ -e "$tmp/ready" ] && return 0; sleep 0.1; done
  echo "launch_uprobes did not attach:"; cat "$tmp/uprobes.err"
}
stop_uprobes() {
  [ -n "$uprobes_pid" ] || return 0
  kill -INT "$uprobes_pid"; wait "$uprobes_pid"; uprobes_pid=
  rm -f "$tmp/uprobes.pid"
  cat "$tmp/uprobes.txt"
}
run() {  # mode round
  local env=() hits=
  case $1 in
    kernels) env=(CUDA_INJECTION64_PATH="$bundle/libapi_records.so" API_RECORDS=none) ;;
    records) env=(CUDA_INJECTION64_PATH="$bundle/libapi_records.so" API_RECORDS=driver) ;;
    uprobes) start_uprobes >&2 ;;
    route) hits=$tmp/hits-$2.txt
           env=(CUDA_INJECTION64_PATH="$bundle/libapi_records.so" API_RECORDS=driver API_RECORDS_OUT="$tmp/records-$2.txt")
           start_uprobes --out "$hits" >&2 ;;
    callbacks) env=(CUDA_INJECTION64_PATH="$bundle/libcupti_toggle.so" TOGGLE_WHAT=stack-sites) ;;
  esac
  env "${env[@]}" timeout 120 "$py" "$here/train_bench.py" --model launch --warmup 200 --steps "$steps" \
      --step-log "$out/$1-$2.steps" > "$out/$1-$2.json" 2> "$out/$1-$2.err"
  stop_uprobes >&2
  # Joined at once: a later round cut short by the caller's time limit
  # must not take this one's join with it.
  if [ -n "$hits" ]; then
    echo "== join, round $2" >&2
    python3 "$here/join_launches.py" "$hits" "$tmp/records-$2.txt" >&2 || echo "join failed" >&2
    rm -f "$hits" "$tmp/records-$2.txt"
  fi
  later_half_median "$out/$1-$2.steps"
}
# shellcheck disable=SC2086  # the modes are words
SAY_PATTERN="api_records: [0-9]\|cupti_toggle: [0-9]" rounds_of_modes run $modes
exit $status
