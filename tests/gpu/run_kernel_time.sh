#!/usr/bin/env bash
# Kernel time and CPU time on a real GPU (the H200 `device` machine), with
# the bundle from scripts/gpu-bundle.sh in .carry/:
#  1. gpuflame record of kernel_workload.py (the injection library is loaded
#     by record itself): kernel time checked against torch.profiler;
#  2. interleaved rounds of the same workload without gpuflame, with only the
#     injection library (no agent), and under gpuflame record (default launch
#     sampling, and every launch): step time and per-launch cost.
# RECORD_FLAGS: more flags for the first (--launch-stacks uprobes: the launch route).
# Every command is bounded; one that overruns gets its processes' states and
# kernel stacks dumped (a device lease is too short to lose to a hang).
GF_OUT_SUFFIX=/kernels . "$(dirname "$0")/common.sh"
w="$here/kernel_workload.py"

# guarded NAME SECONDS CMD...: stdout to $out/NAME.out, stderr to NAME.err.
guarded() {
  local name=$1 secs=$2; shift 2
  "$@" >"$out/$name.out" 2>"$out/$name.err" &
  local pid=$! t=0
  while kill -0 $pid 2>/dev/null && [ $t -lt $((secs * 10)) ]; do sleep 0.1; t=$((t + 1)); done
  if kill -0 $pid 2>/dev/null; then
    echo "!! $name still running after ${secs}s:" | tee -a "$out/hangs.txt"
    ps -eo pid,ppid,stat,wchan:32,etime,args | grep -E "python|gpuflame" | grep -v grep | tee -a "$out/hangs.txt"
    for p in $(pgrep -f kernel_workload.py); do
      for t in /proc/$p/task/*; do
        echo "-- $t $(awk '{print $3}' $t/stat) $(cat $t/comm)"; cat $t/stack 2>/dev/null | head -6
      done
    done >>"$out/hangs.txt"
    pkill -KILL -f kernel_workload.py; kill -KILL $pid 2>/dev/null
    status=1
  fi
  wait $pid 2>/dev/null
  return 0
}

if [ -z "${SKIP_CHECK:-}" ]; then
echo "== kernel time vs torch.profiler (200 steps)"
GPUFLAME_CUPTI_DEBUG=1 guarded rec 150 "$bundle/gpuflame" record ${RECORD_FLAGS:-} -o "$out/rec" -- $py "$w" --steps 200 --tiny 0
tail -5 "$out/rec.err"
python3 -c "import json; d=json.load(open('$out/rec/summary.json')); print(json.dumps(d['gpu_kernels']))
print('BPF programs on launches:', {k: v for k, v in d['self_cost']['programs'].items() if 'launch' in k})" || true
guarded prof 120 $py "$w" --steps 200 --profile "$out/prof.json"
python3 "$here/check_kernels.py" "$out/rec" "$out/prof.json" || status=1
sort -t' ' -k2 -nr "$out/rec/process_cpu.cpu.folded" 2>/dev/null | head -3 | cut -c1-400
fi
args="--steps ${STEPS:-100} --scale ${SCALE:-1}"
echo "== overhead: ${ROUNDS:-3} interleaved rounds of: $args, then 20000 tiny launches"
for r in $(seq "${ROUNDS:-3}"); do
  guarded plain$r 90 $py "$w" $args
  echo "round $r plain $(cat "$out/plain$r.out")"
  CUDA_INJECTION64_PATH=$bundle/libgpuflame_cupti.so guarded inject$r 90 $py "$w" $args
  echo "round $r inject_only $(cat "$out/inject$r.out")"
  GPUFLAME_CUPTI_DEBUG=1 guarded gf$r 120 "$bundle/gpuflame" record -q -o "$out/o$r" -- $py "$w" $args
  echo "round $r gpuflame $(cat "$out/gf$r.out")"
  GPUFLAME_LAUNCH_STACKS_PER_S=0 guarded all$r 120 "$bundle/gpuflame" record -q -o "$out/a$r" -- $py "$w" $args
  echo "round $r gpuflame_all_launches $(cat "$out/all$r.out")"
done > "$out/overhead.txt"
cat "$out/overhead.txt"
[ -f "$out/hangs.txt" ] && cat "$out/hangs.txt" && tail -5 "$out"/gf*.err
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
for d in o1 a1; do [ -f "$out/$d/summary.json" ] && python3 -c "import json; d=json.load(open('$out/$d/summary.json')); print('$d', json.dumps(d['gpu_kernels']), d['bpf']['ringbuf_full_drops'], d['warnings'])"; done
exit $status
