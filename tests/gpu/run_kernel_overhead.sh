#!/usr/bin/env bash
# Kernel time's cost on a real GPU (the H200 `device` machine), in one
# workload process per model with observers switched between rounds
# (bench/overhead_harness.cc): none, the agent's default (CUPTI activity
# duty-cycled), record's exact mode, and PyTorch's own recorder, on the
# launch-bound GPT and the ~1B-parameter one. Then one `record` run with the
# library's debug output, for what switching CUPTI on and off costs and
# whether the in-process walker's checks pass on real PyTorch. Carries a
# build from scripts/gpu-bundle.sh (.carry/). Output goes to $OUT.
#   ROUNDS (10), ITERS (launch model steps per round, 100),
#   LARGE_ITERS (10), KERNEL_ROUNDS (10), KERNEL_ITERS (400), ON_S / ONE_IN
#   (the duty cycle: 1 / 10); parts are skipped with SKIP_LAUNCH,
#   SKIP_MEMORY, SKIP_KERNELS, SKIP_LARGE, SKIP_RECORD, SKIP_BACKWARD
. "$(dirname "$0")/common.sh"
export GPUFLAME_ACTIVITY_ON_S=${ON_S:-1} GPUFLAME_ACTIVITY_ONE_IN=${ONE_IN:-10}
modes=none,inprocess,inprocess-exact,history-python
harness() {
  "$bundle/gpuflame_overhead" --python "$py" --workload "$root/bench/step_workload.py" --kernel-time \
      --injection "$bundle/libgpuflame_cupti.so" --modes "$modes" "$@" || status=1
}
if [ -z "${SKIP_LAUNCH:-}" ]; then
  echo "== launch-bound GPT: kernel time, memory in-process (duty cycle ${GPUFLAME_ACTIVITY_ON_S} s in ${GPUFLAME_ACTIVITY_ONE_IN})"
  harness --rounds "${ROUNDS:-10}" --iters "${ITERS:-100}"
fi
if [ -z "${SKIP_MEMORY:-}" ]; then
  echo "== launch-bound GPT: memory only (the tensor hook alone)"
  "$bundle/gpuflame_overhead" --python "$py" --workload "$root/bench/step_workload.py" \
      --injection "$bundle/libgpuflame_cupti.so" --modes none,inprocess,inprocess-exact,history-python \
      --settle-ms 2000 --rounds "${ROUNDS:-10}" --iters "${ITERS:-100}" || status=1
fi
if [ -z "${SKIP_KERNELS:-}" ]; then
  # 500 launches a step and no allocation: "added ns/event" is per launch
  # (issue 11, item 5: at most 1 µs), beside the placebo's spread.
  echo "== kernel loop: kernel time per launch (duty cycle ${GPUFLAME_ACTIVITY_ON_S} s in ${GPUFLAME_ACTIVITY_ONE_IN})"
  GPUFLAME_BENCH_MODEL=kernels "$bundle/gpuflame_overhead" --python "$py" --workload "$root/bench/step_workload.py" \
      --kernel-time --injection "$bundle/libgpuflame_cupti.so" --modes none,placebo,inprocess,inprocess-exact \
      --events-per-iter 500 --rounds "${KERNEL_ROUNDS:-10}" --iters "${KERNEL_ITERS:-400}" || status=1
fi
if [ -z "${SKIP_LARGE:-}" ]; then
  echo "== ~1B-parameter GPT"
  GPUFLAME_BENCH_MODEL=large harness --rounds "${LARGE_ROUNDS:-6}" --iters "${LARGE_ITERS:-10}"
fi
if [ -z "${SKIP_RECORD:-}" ]; then
  echo "== record, sampled activity, library debug output"
  GPUFLAME_CUPTI_DEBUG=1 GPUFLAME_STARTUP_S=0 GPUFLAME_ACTIVITY_ON_S=0.5 GPUFLAME_ACTIVITY_ONE_IN=4 \
    "$bundle/gpuflame" record -q --kernel-activity sampled -o "$out/sampled" -- \
    $py "$here/train_bench.py" --steps 400 2> "$out/sampled.log" || status=1
  grep -v 'flush$' "$out/sampled.log" | sort | uniq -c | sort -rn | head -20
  python3 - "$out/sampled" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/summary.json"))
print("gpu_kernels", json.dumps(d["gpu_kernels"]))
print("inprocess", json.dumps(d.get("inprocess")))
print("tensor", json.dumps({k: d[k] for k in d if "tensor" in k}))
PY
  "$bundle/gpuflame" record -q -o "$out/exact" -- $py "$here/train_bench.py" --steps 200 2> "$out/exact.log" || status=1
  tail -3 "$out/exact.log"
  # The in-process walker on real PyTorch: tensor stacks under Trainer > step.
  for f in "$out/exact/torch_memory.alloc_space.folded" "$out/exact/gpu_kernel.time.folded"; do
    awk -v f="$(basename "$f")" '{n = $NF; t += n; if ($0 ~ /Trainer > step/) s += n}
         END {printf "%s: %.1f%% under Trainer > step\n", f, t ? 100 * s / t : 0}' "$f" || status=1
  done
  python3 -c "import json; d = json.load(open('$out/exact/summary.json')); print('self_cost.library', d['self_cost']['library']); print('gates', d.get('gates'))"
fi
if [ -z "${SKIP_BACKWARD:-}" ]; then
  echo "== backward() attributed to its caller (tests/gpu/backward_origin.py)"
  lib=$($py -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
  nm -D "$lib/libtorch_cpu.so" | grep _ZN5torch8autograd6Engine7executeE
  objdump -R "$lib/libtorch_python.so" | grep _ZN5torch8autograd6Engine7executeE
  "$bundle/gpuflame" record -q -o "$out/bw" -- $py "$here/backward_origin.py" --steps 50 --stats "$out/bw-stats.json" || status=1
  $py "$here/backward_origin.py" --steps 50 --profile "$out/bw-prof.json" || status=1
  $py "$here/backward_origin.py" --check "$out/bw" --stats "$out/bw-stats.json" --profile "$out/bw-prof.json" || status=1
  echo "== the same, tensor events sampled by bytes (the agent's default), start-up not exempted"
  GPUFLAME_STARTUP_S=0 "$bundle/gpuflame" record -q --tensor-sampling sampled -o "$out/bw-sampled" -- \
    $py "$here/backward_origin.py" --steps 50 --stats "$out/bw-sampled-stats.json" || status=1
  $py "$here/backward_origin.py" --check "$out/bw-sampled" --stats "$out/bw-sampled-stats.json" || status=1
  python3 -c "import json; d = json.load(open('$out/bw-sampled/summary.json')); print('sampled:', d['events']['sampled_allocs'], 'of', d['events']['allocs'], 'allocations taken by sampling;', d['inprocess']['events'], 'events sent of', d['self_cost']['library']['tensor_events'], 'seen; processes', [p.get('tensor_sample_bytes') for p in d['processes']])"
  echo "== the same through the probes (the agent's path where the workload does not load the library)"
  "$bundle/gpuflame" record -q --tensor-events probes --no-kernel-time -o "$out/bw-probes" -- \
    $py "$here/backward_origin.py" --steps 50 --stats "$out/bw-probes-stats.json" || status=1
  $py "$here/backward_origin.py" --check "$out/bw-probes" --probes --stats "$out/bw-probes-stats.json" || status=1
  awk '{print $NF "\t" $0}' "$out/bw-probes/torch_memory.alloc_space.folded" | sort -nr | head -12 | cut -f2 | cut -c1-400
fi
tar -C "$out" -czf "$out/outputs.tgz" sampled exact sampled.log exact.log bw bw-sampled bw-probes 2>/dev/null
exit $status
