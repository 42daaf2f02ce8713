#!/usr/bin/env bash
# The launch route's switch is the process's: while the agent (whose default
# it is) asks for it, the library takes no launch stack by its callbacks, so
# a `gpuflame record --pid` beside it, which asks for the callbacks, must
# follow the route's windows with uprobes of its own. One launch-bound
# training process (tests/gpu/train_bench.py, the library injected), found
# running by the agent at its defaults; RECORD_S (8) seconds of record beside
# it. Prints the agent's route counters, record's gpu_kernels (launch stacks,
# its launch_route with asked: false) and the library's exit line (callbacks
# delivered: none expected). With the bundle from scripts/gpu-bundle.sh in
# .carry/; output under $OUT.
GF_OUT_SUFFIX=/route-follower . "$(dirname "$0")/common.sh"
record_s=${RECORD_S:-8}
start_stub_pyroscope
GPUFLAME_CUPTI_DEBUG=1 CUDA_INJECTION64_PATH=$bundle/libgpuflame_cupti.so "$py" "$here/train_bench.py" \
    --model "${MODEL:-launch}" --warmup 100 --steps 6000 --step-log "$out/steps.log" > "$out/workload.json" 2>&1 &
workload=$!
for _ in $(seq 600); do [ -s "$out/steps.log" ] && break; sleep 0.1; done
[ -s "$out/steps.log" ] || { echo "the workload never started its timed steps"; cat "$out/workload.json"; exit 1; }
sleep 3
"$bundle/gpuflame" agent --pyroscope-url "http://127.0.0.1:$port" --pid "$workload" \
    --metrics-port "$metrics_port" --spool-dir "" > "$out/agent.log" 2>&1 &
agent=$!
sleep 4
"$bundle/gpuflame" record -q -d "$record_s" -o "$out/record" --pid "$workload" > "$out/record.log" 2>&1
echo "record exited $?"
sleep 2
echo "the agent's /metrics: $(env -u LD_LIBRARY_PATH curl -s --max-time 1 "http://127.0.0.1:$metrics_port/metrics" |
    grep -E '^gpuflame_(kernel_launch_stacks|launch_route_[a-z_]+|library_cupti_callback_seconds)_total[ {]' |
    sed 's/{[^}]*}//' | tr '\n' ' ')"
kill -INT $agent 2>/dev/null; wait $agent 2>/dev/null; agent=
kill $workload 2>/dev/null
for _ in $(seq 100); do kill -0 $workload 2>/dev/null || break; sleep 0.1; done
kill -KILL $workload 2>/dev/null; wait $workload 2>/dev/null; workload=
python3 - "$out/record/summary.json" "$out/record/gpu_kernel.time.folded" <<'PY'
import json, sys
try:
    k = json.load(open(sys.argv[1]))["gpu_kernels"]
    print("record's gpu_kernels:", {key: k.get(key) for key in ("launch_stacks", "activity_records", "joined")})
    print("record's launch_route:", k.get("launch_route"))
    total = unsampled = 0
    for line in open(sys.argv[2]):
        stack, _, value = line.rstrip("\n").rpartition(" ")
        total += int(value)
        unsampled += int(value) if "[launch stack not sampled]" in stack else 0
    print(f"record's kernel time: {total / 1e9:.3f} s, {unsampled / max(total, 1):.1%} of it under "
          "[launch stack not sampled]")
except Exception as e:  # noqa: BLE001 - said, not raised: the rest still prints
    print(f"record's outputs unreadable: {e}")
PY
grep -E "gpuflame_cupti: .*switches|launch records primed|launch stacks by CUPTI" "$out/workload.json" | cut -c1-400
grep -iE "warning|error" "$out/agent.log" "$out/record.log" | head -5
