#!/usr/bin/env bash
# Out-of-memory forensics on a real GPU (the H200 `device` machine): a
# PyTorch workload (tests/gpu/oom_workload.py) runs out of memory on purpose
# under `gpuflame record`, in three ways: PyTorch's retry after freeing its
# cache succeeds; it raises OutOfMemoryError (caught); it raises and the
# process exits at once. Each capture (summary.json's "oom") is checked
# against PyTorch's own memory_allocated/memory_reserved/memory_snapshot/
# memory_stats, side by side, in-process and through the probes. Carries a
# build from scripts/gpu-bundle.sh (.carry/). Output goes to $OUT.
GF_OUT_SUFFIX=/oom . "$(dirname "$0")/common.sh"
echo "== host"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$py -c 'import torch; print("torch", torch.__version__)'
echo "== c10::reportOutOfMemoryToProfiler in this libc10.so (gpuflame hooks either spelling)"
c10=$($py -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))')
nm -D "$c10" | grep reportOutOfMemoryToProfiler || echo "   (none exported)"
for run in "rescue:" "raise:" "exit:" "raise:--tensor-events probes"; do
  mode=${run%%:*}; flags=${run#*:}
  name=$mode; [ -n "$flags" ] && name=$mode-probes
  echo "== $name"
  timeout 120 "$bundle/gpuflame" record -o "$out/$name" $flags -- \
      $py "$here/oom_workload.py" "$mode" --stats "$out/$name.json" > "$out/$name.log" 2>&1
  rc=$?
  want=0; [ "$mode" = exit ] && want=3
  [ "$rc" = "$want" ] || { echo "   record exited $rc, not $want"; status=1; }
  grep "gpuflame: OOM in pid" "$out/$name.log" | cut -c1-400
  $py "$here/oom_workload.py" --check "$out/$name" --stats "$out/$name.json" --mode "$mode" \
      ${flags:+--probes} || status=1
done
tar -C "$out" -czf "$out/outputs.tgz" rescue raise exit raise-probes 2>/dev/null
echo "== status $status"
exit $status
