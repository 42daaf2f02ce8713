#!/usr/bin/env bash
# Why is the GPU idle, on a real GPU (the H200 `device` machine), with the
# bundle from scripts/gpu-bundle.sh in .carry/: for each of idle_workload.py's
# cases (CASES; default all four: starved, tiny, matmul, stream), `gpuflame
# record` (verdict lines, the summary's utilization figures, NVML's
# figures), nvidia-smi's own utilisation readings taken
# alongside (an independent reader), then a plain run and a torch.profiler
# run of the same steps without gpuflame (its kernel count and kernel time).
GF_OUT_SUFFIX=/idle . "$(dirname "$0")/common.sh"
declare -A steps=([starved]=${STARVED_STEPS:-120} [tiny]=${TINY_STEPS:-1500} [matmul]=${MATMUL_STEPS:-200} [stream]=${STREAM_STEPS:-300})
for mode in ${CASES:-starved tiny matmul stream}; do
  echo "== $mode"
  mkdir -p "$out/$mode"
  smi=""
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,power.draw --format=csv,noheader,nounits \
        -lms 100 >"$out/$mode/nvidia-smi.csv" 2>/dev/null &
    smi=$!
  fi
  timeout 240 "$bundle/gpuflame" record --no-progress -o "$out/$mode" -- $py "$here/idle_workload.py" $mode ${steps[$mode]} \
      >"$out/$mode/stdout" 2>"$out/$mode/stderr" || status=1
  [ -n "$smi" ] && kill $smi 2>/dev/null
  cat "$out/$mode/stdout"
  grep -A9 "^gpuflame: NVML GPU \|^gpuflame: GPU " "$out/$mode/stderr" | head -14
  python3 - "$out/$mode/summary.json" "$out/$mode/nvidia-smi.csv" <<'PY'
import json, sys
u = json.load(open(sys.argv[1]))["utilization"]
for g in u["gpus"]:
    print(json.dumps({k: g.get(k) for k in ("pid", "gpu", "verdict", "reason", "start_up", "idle_gaps_in_sync_s",
                                            "idle_time_under", "records", "sync")}))
    print("steady", json.dumps(g["steady"]))
    print("steady nvml", json.dumps(g.get("nvml")))
for d in u["devices"]:
    print("device", json.dumps(d))
print("missing", json.dumps(u.get("devices_missing")), "cost", json.dumps(u.get("devices_cost")))
try:
    rows = [l.split(", ") for l in open(sys.argv[2]) if l.strip()]
    util = [float(r[1]) for r in rows if r[1].strip().isdigit()]
    busy = [x for x in util if x > 0]
    print("nvidia-smi: %d readings, utilization.gpu mean %.1f%% over the readings above 0 (%d), max %.0f%%"
          % (len(util), sum(busy) / max(1, len(busy)), len(busy), max(util or [0])))
except OSError:
    print("nvidia-smi: not run")
PY
  echo "-- $mode plain, then under torch.profiler, without gpuflame"
  timeout 240 $py "$here/idle_workload.py" $mode ${steps[$mode]} || status=1
  timeout 240 $py "$here/idle_workload.py" $mode ${steps[$mode]} torch-profiler || status=1
done
tar -C "$out" -czf "$out/outputs.tgz" starved tiny matmul 2>/dev/null
exit $status
