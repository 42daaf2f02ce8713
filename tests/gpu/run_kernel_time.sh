#!/usr/bin/env bash
# Kernel time and CPU time on a real GPU (the H200 `device` machine), with
# the bundle from scripts/gpu-bundle.sh in .carry/:
#  1. gpuflame record of kernel_workload.py (the injection library is loaded
#     by record itself): kernel time checked against torch.profiler;
#  2. interleaved rounds of the same workload without gpuflame, with only the
#     injection library (no agent), and under gpuflame record (default launch
#     sampling, and every launch): step time and per-launch cost.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bundle=$root/.carry
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${OUT:-/tmp/gpuflame-gpu}/kernels
mkdir -p "$out"
py=${PYTHON:-python3}
w="$here/kernel_workload.py"
status=0
echo "== kernel time vs torch.profiler (200 steps)"
"$bundle/gpuflame" record -q -o "$out/rec" -- $py "$w" --steps 200 --tiny 0 || status=1
$py "$w" --steps 200 --profile "$out/prof.json" || status=1
python3 "$here/check_kernels.py" "$out/rec" "$out/prof.json" || status=1
sort -t' ' -k2 -nr "$out/rec/process_cpu.cpu.folded" 2>/dev/null | head -3 | cut -c1-400
echo "== overhead: ${ROUNDS:-4} interleaved rounds, 100 steps + 20000 tiny launches each"
for r in $(seq "${ROUNDS:-4}"); do
  echo "round $r plain $($py "$w" --steps 100)"
  echo "round $r inject_only $(CUDA_INJECTION64_PATH=$bundle/libgpuflame_cupti.so $py "$w" --steps 100)"
  echo "round $r gpuflame $("$bundle/gpuflame" record -q -o "$out/o$r" -- $py "$w" --steps 100)"
  echo "round $r gpuflame_all_launches $(GPUFLAME_LAUNCH_STACKS_PER_S=0 "$bundle/gpuflame" record -q -o "$out/a$r" -- $py "$w" --steps 100)"
done | tee "$out/overhead.txt"
python3 - "$out/overhead.txt" <<'PY'
import json, re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ (\S+) (\{.*\})", line.strip())
    if m:
        runs.setdefault(m.group(1), []).append(json.loads(m.group(2)))
base = runs.get("plain")
for mode, rs in runs.items():
    step = statistics.median(r["step_ms"] for r in rs)
    tiny = statistics.median(r["tiny_launch_us"] for r in rs)
    line = f"{mode:24s} step {step:7.3f} ms  tiny launch {tiny:6.2f} us"
    if base and mode != "plain":
        b_step = statistics.median(r["step_ms"] for r in base)
        b_tiny = statistics.median(r["tiny_launch_us"] for r in base)
        line += f"  (step {100 * (step / b_step - 1):+.2f}%, launch {tiny - b_tiny:+.2f} us)"
    print(line)
PY
exit $status
