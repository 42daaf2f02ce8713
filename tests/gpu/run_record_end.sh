#!/usr/bin/env bash
# record's end on a process that runs on (session 43): the injection library
# hands its kernel records to the agent every GPUFLAME_FLUSH_MS (1 s), so a
# recording that ends first asks it for them (gpuflame:flushed) and
# waits for its answer. On the launch-bound GPT (tests/gpu/train_bench.py)
# with the library loaded, RUNS times: `record --pid -d DURATION` 8 s in, its
# launch stacks against the records they joined (before this, the last
# period's stacks had none), its library_flush, and how long record took.
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   RUNS (3), DURATION (3)
GF_OUT_SUFFIX=/record-end . "$(dirname "$0")/common.sh"
trap 'kill $workload 2>/dev/null' EXIT
workload=
for ((v = 1; v <= ${RUNS:-3}; v++)); do
  CUDA_INJECTION64_PATH=$bundle/libgpuflame_cupti.so GPUFLAME_CUPTI_DEBUG=1 "$py" "$here/train_bench.py" \
      --steps 100000 >"$out/workload$v.out" 2>"$out/workload$v.err" &
  workload=$!
  sleep 8
  t0=$(date +%s.%N)
  "$bundle/gpuflame" record -q -d "${DURATION:-3}" -o "$out/rec$v" --pid "$workload" >"$out/record$v.log" 2>&1 ||
    { status=1; tail -5 "$out/record$v.log"; }
  t1=$(date +%s.%N)
  kill $workload 2>/dev/null; wait $workload 2>/dev/null; workload=
  echo "== run $v: record took $(python3 -c "print(round($t1 - $t0, 2))") s"
  python3 - "$out/rec$v/summary.json" <<'PY' || status=1
import json, sys
s = json.load(open(sys.argv[1]))
k = s["gpu_kernels"]
print("  gpu_kernels:", json.dumps({x: k.get(x) for x in ("launch_stacks", "activity_records", "joined",
      "charged_by_sampled_share", "launch_stack_not_sampled", "expired_launch_stacks", "activity")}))
print("  joined / launch stacks: %.4f" % (k["joined"] / max(k["launch_stacks"], 1)))
print("  library_flush:", json.dumps(s.get("library_flush")))
PY
  grep -hE "flush: asked" "$out/workload$v.err" | sort | uniq -c
done
exit $status
