#!/usr/bin/env bash
# The probes' path on a real GPU (the H200 `device` machine): what the agent
# sees of a PyTorch process that does not load libgpuflame_cupti.so. A
# training loop's backward() attributed by BPF (tests/gpu/backward_origin.py
# --check --probes), its tensor bytes against memory_stats(); then how long
# record's gates hold its command, twice, 6 s apart (the second after the
# first session's probes have left the kernel). Carries a build from
# scripts/gpu-bundle.sh (.carry/). Output goes to $OUT.
. "$(dirname "$0")/common.sh"
echo "== backward() through the probes: record --tensor-events probes --no-kernel-time"
"$bundle/gpuflame" record -q --tensor-events probes --no-kernel-time -o "$out/bw-probes" -- \
  $py "$here/backward_origin.py" --steps 50 --stats "$out/bw-probes-stats.json" || status=1
$py "$here/backward_origin.py" --check "$out/bw-probes" --probes --stats "$out/bw-probes-stats.json" || status=1
python3 -c "import json; d = json.load(open('$out/bw-probes/summary.json')); print('backward_callers_lent', d['backward_callers_lent']); print('bpf', {k: v for k, v in d['bpf'].items() if 'backward' in k or 'ringbuf' in k or 'stacks_sent' in k}); print('stack ids', {k: v for k, v in d['events'].items() if k.startswith('stack_id')}); print('gates', d['gates'])"
awk '{print $NF "\t" $0}' "$out/bw-probes/torch_memory.alloc_space.folded" | sort -nr | head -8 | cut -f2 | cut -c1-300
echo "== the same with CPU samples on the engine thread's side: CPU time under <autograd engine>"
awk '{n = $NF; t += n; if ($0 ~ /<autograd engine>/) e += n}
     END {printf "process_cpu: %d samples, %.1f%% through <autograd engine>\n", t, t ? 100 * e / t : 0}' \
  "$out/bw-probes/process_cpu.cpu.folded"
echo "== record's gates on a short PyTorch process, twice, 6 s apart"
for i in 1 2; do
  "$bundle/gpuflame" record -q -o "$out/short-$i" -- \
    $py -c 'import torch; x = torch.empty(1 << 20, device="cuda"); torch.cuda.synchronize()' || status=1
  python3 -c "import json; print('gates', json.load(open('$out/short-$i/summary.json'))['gates'])"
  sleep 6
done
tar -C "$out" -czf "$out/outputs.tgz" bw-probes 2>/dev/null
exit $status
