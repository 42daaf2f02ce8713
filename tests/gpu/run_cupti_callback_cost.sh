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
#   cupti     cupti_toggle.c with TOGGLE_WHAT=stack-sites: the callbacks
#             gpuflame enables for good (the driver's launches, the
#             runtime's copies and memsets) on from the start, a callback
#             that only counts, no activity, no gpuflame: CUPTI's dispatch
#             alone;
#   library   libgpuflame_cupti.so injected and no agent: what the library
#             costs while nobody listens (callbacks not yet enabled).
# Prints each run's median step and each mode's ratio to plain in its round
# ("nan" where a run failed: its .err under $OUT says why).
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   ROUNDS (2), STEPS (1200)
GF_OUT_SUFFIX=/cupti-callback-cost . "$(dirname "$0")/common.sh"
steps=${STEPS:-1200}
run() {  # mode round
  local env=()
  case $1 in
    cupti) env=(CUDA_INJECTION64_PATH="$bundle/libcupti_toggle.so" TOGGLE_WHAT=stack-sites) ;;
    library) env=(CUDA_INJECTION64_PATH="$bundle/libgpuflame_cupti.so") ;;
  esac
  env "${env[@]}" timeout 120 "$py" "$here/train_bench.py" --model launch --warmup 200 --steps "$steps" \
      > "$out/$1-$2.json" 2> "$out/$1-$2.err"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_ms_median"])' "$out/$1-$2.json" 2>/dev/null ||
      echo nan
}
for r in $(seq "${ROUNDS:-2}"); do
  plain=$(run plain "$r"); cupti=$(run cupti "$r"); library=$(run library "$r")
  python3 - "$r" "$plain" "$cupti" "$library" <<'PY'
import sys
r, plain, cupti, library = sys.argv[1], *map(float, sys.argv[2:])
print(f"round {r}: plain {plain:.3f} ms, cupti {cupti:.3f} ms (x{cupti / plain:.3f}), "
      f"library {library:.3f} ms (x{library / plain:.3f})")
PY
  grep -h "cupti_toggle: [0-9]" "$out/cupti-$r.err" | tail -1
done
exit 0
