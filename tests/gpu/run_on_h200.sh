#!/usr/bin/env bash
# Runs gpuflame on a real GPU (the H200 `device` machine): carries a build made
# on the development machine (scripts/gpu-bundle.sh puts it in .carry/), then
# profiles torch_workload.py with the default allocator and with
# expandable_segments, and checks the profiles. Output goes to $OUT.
. "$(dirname "$0")/common.sh"
echo "== host"; uname -r; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$py -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])'
for conf in "" "expandable_segments:True"; do
  name=default; [ -n "$conf" ] && name=expandable
  echo "== run: $name (PYTORCH_CUDA_ALLOC_CONF=$conf)"
  mkdir -p "$out/$name"
  GPUFLAME_WORKLOAD_REPORT=$out/$name/workload.json PYTORCH_CUDA_ALLOC_CONF=$conf "$bundle/gpuflame" record -q -o "$out/$name" -- \
      $py "$here/torch_workload.py" || status=1
  python3 -c "import json,sys; d=json.load(open('$out/$name/summary.json')); print(json.dumps({k: d[k] for k in ('bpf','events','symbols','warnings')}))"
  python3 "$here/check_profile.py" "$out/$name" || status=1
done
echo "== overhead: torch.empty(4096)+del, 20 Python frames deep, interleaved rounds"
"$bundle/gpuflame_overhead" --python "$py" --workload "$root/bench/overhead_workload.py" \
    --rounds "${ROUNDS:-10}" --iters "${ITERS:-20000}" ${WORKLOAD_CPU:+--workload-cpu $WORKLOAD_CPU} || status=1
# Only a few files come back from the device: pack the rest.
tar -C "$out" -czf "$out/outputs.tgz" default expandable 2>/dev/null
exit $status
