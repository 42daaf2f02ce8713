#!/usr/bin/env bash
# The agent in continuous use (issue 11, targets 2 and 3): its budget ladder
# acts over tens of seconds, which the one-process harness's short agent
# rounds (run_agent_overhead.sh) never reach. One launch-bound training
# process (tests/gpu/train_bench.py, the library injected as a deployment
# injects it) runs throughout; after PLAIN_S seconds of timed steps the
# agent attaches at its defaults (1% overhead budget) and stays AGENT_S
# seconds, then leaves for the rest. Prints the median step time of each
# 10-s window against the plain steps before the agent (those after it
# still pay for what its first attach left on: CUPTI's launch callbacks,
# enabled for good), next to the agent's own account read from its
# /metrics every 5 s: its overhead ratio, the thrift level asked of the
# library, what it sheds. With the bundle from scripts/gpu-bundle.sh in
# .carry/; output under $OUT.
#   PLAIN_S (20), AGENT_S (60), AFTER_S (15), MODEL (launch), STEP_MS_MIN (8); VISITS (1): the
#   agent comes VISITS times, AFTER_S apart (with GPUFLAME_CUPTI_DETACH_S in the
#   environment, each later one finds CUPTI detached and subscribes again:
#   its kernels and launch stacks, from /metrics, say whether that worked); FAKE=1 sleeps
#   instead of training (train_bench.py --fake), to try the script without a GPU;
#   AGENT_BUILD, a folder with another build's gpuflame and libgpuflame_cupti.so
#   (the shared libraries stay the bundle's), to compare builds on one host;
#   GPUFLAME_LAUNCH_STACKS=uprobes in the environment: the agent takes launch
#   stacks by the launch route (no CUPTI callback: nothing is left on after it)
GF_OUT_SUFFIX=/agent-continuous . "$(dirname "$0")/common.sh"
build=${AGENT_BUILD:-$bundle}
plain_s=${PLAIN_S:-20} agent_s=${AGENT_S:-60} after_s=${AFTER_S:-15}
start_stub_pyroscope
steps_log=$out/steps.log metrics_log=$out/metrics.log marks=$out/marks
: > "$steps_log"; : > "$metrics_log"; : > "$marks"
# Enough steps for every phase at STEP_MS_MIN a step (8: the launch model's
# fastest seen on these hosts; 1 for MODEL=kernels); the workload is stopped
# once the phases are over.
visits=${VISITS:-1}
total_s=$((plain_s + (agent_s + after_s) * visits))
CUDA_INJECTION64_PATH=$build/libgpuflame_cupti.so "$py" "$here/train_bench.py" --model "${MODEL:-launch}" ${FAKE:+--fake --fake-ms 10} \
    --warmup 100 --steps $((total_s * 1000 / ${STEP_MS_MIN:-8})) --step-log "$steps_log" > "$out/workload.json" 2>&1 &
workload=$!
# Timed steps have begun once the log has lines.
for _ in $(seq 600); do [ -s "$steps_log" ] && break; sleep 0.1; done
[ -s "$steps_log" ] || { echo "the workload never started its timed steps"; cat "$out/workload.json"; exit 1; }
now_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }
echo "plain_from $(now_ns)" >> "$marks"
sleep "$plain_s"
for visit in $(seq "$visits"); do
  suffix=$([ "$visit" = 1 ] || echo "$visit")
  echo "agent_at$suffix $(now_ns)" >> "$marks"
  "$build/gpuflame" agent --pyroscope-url "http://127.0.0.1:$port" --pid "$workload" \
      --metrics-port "$metrics_port" --spool-dir "" > "$out/agent$suffix.log" 2>&1 &
  agent=$!
  end=$(( $(date +%s) + agent_s ))
  while [ "$(date +%s)" -lt "$end" ]; do
    sleep 5
    m=$(env -u LD_LIBRARY_PATH curl -s --max-time 1 "http://127.0.0.1:$metrics_port/metrics" |
        grep -E '^gpuflame_(overhead_ratio|thrift_level|shedding|library_tensor_hook_seconds_total|library_cupti_callback_seconds_total|library_thread_seconds_total|library_tensor_hook_calls_total|gpu_lane_kernels_total|kernel_launch_stacks_total|launch_route_hits_total|launch_route_records_total|launch_route_records_unconverted_total|launch_route_joined_total|launch_route_unjoined_total|launch_route_windows_total)[ {]' |
        sed 's/{[^}]*}//' | tr '\n' ' ')
    echo "$(now_ns) $m" >> "$metrics_log"
  done
  echo "visit $visit, its last /metrics: $(tail -1 "$metrics_log" | cut -d' ' -f2-)"
  echo "agent_gone$suffix $(now_ns)" >> "$marks"
  kill -INT $agent 2>/dev/null; wait $agent 2>/dev/null; agent=
  sleep "$after_s"
done
echo "end $(now_ns)" >> "$marks"
# SIGTERM: train_bench.py exits through atexit (its library's exit handler
# runs); KILL after 10 s if it does not.
kill $workload 2>/dev/null
for _ in $(seq 100); do kill -0 $workload 2>/dev/null || break; sleep 0.1; done
kill -KILL $workload 2>/dev/null; wait $workload 2>/dev/null; workload=
python3 - "$steps_log" "$marks" "$metrics_log" <<'PY'
import statistics, sys
steps = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
marks = {k: int(v) for k, v in (l.split() for l in open(sys.argv[2]))}
metrics = []
for line in open(sys.argv[3]):
    parts = line.split()
    if not parts:
        continue
    at, kv = int(parts[0]), dict(zip(parts[1::2], parts[2::2]))
    metrics.append((at, kv))
t0 = marks["agent_at"]

def window(lo, hi):
    ms = [m for at, m in steps if lo <= at < hi]
    return statistics.median(ms) if len(ms) >= 20 else None, len(ms)

def phase(lo, hi, name):
    rows, t = [], lo
    while t + 5e9 <= hi:
        med, n = window(t, min(t + 10e9, hi))
        rows.append((name, (t - t0) / 1e9, med, n))
        t += 10e9
    return rows

rows = phase(marks["plain_from"], marks["agent_at"], "plain") + \
       phase(marks["agent_at"], marks["agent_gone"], "agent") + \
       phase(marks["agent_gone"], marks.get("agent_at2", marks["end"]), "plain after")
for v in range(2, 100):
    if f"agent_at{v}" not in marks:
        break
    rows += phase(marks[f"agent_at{v}"], marks[f"agent_gone{v}"], f"agent {v}")
    rows += phase(marks[f"agent_gone{v}"], marks.get(f"agent_at{v + 1}", marks["end"]), "plain after")
before = [m for at, m in steps if marks["plain_from"] <= at < marks["agent_at"]]
after = [m for at, m in steps if marks["agent_gone"] + 2e9 <= at < marks.get("agent_at2", marks["end"])]
# The baseline is the plain steps before the agent only: after it, the
# process still pays for what its first attach left on (CUPTI's launch
# callbacks, enabled for good; the tensor hook), which "after" shows.
plain = statistics.median(before) if before else None
after_med = statistics.median(after) if after else None
print(f"plain median {plain:.3f} ms before the agent ({len(before)} steps); after it left "
      f"{after_med if after_med else float('nan'):.3f} ms "
      f"(x{after_med / plain if after_med and plain else float('nan'):.3f}: what its first attach left on; "
      f"{len(after)} steps)")
print("window from attach  phase        median ms  vs plain  steps  | agent's own account at the window's end")
for name, start, med, n in rows:
    acct = ""
    if name.startswith("agent"):
        end_ns = t0 + (start + 10) * 1e9
        seen = [kv for at, kv in metrics if at <= end_ns]
        if seen:
            kv = seen[-1]
            ratio = float(kv.get('gpuflame_overhead_ratio', -1))
            acct = (f"overhead {f'{ratio * 100:.2f}%' if ratio >= 0 else 'unknown'}  thrift "
                    f"{kv.get('gpuflame_thrift_level', '?')}  shedding {kv.get('gpuflame_shedding', '?')}")
    ratio = f"{med / plain:.3f}" if med and plain else "-"
    print(f"{start:+8.0f} s          {name:12s} {med if med else float('nan'):9.3f}  {ratio:>8s}  {n:5d}  | {acct}")
# Per step, the library's parts over the agent's (first) stay (counters).
first = [m for m in metrics if m[0] < marks["agent_gone"]]  # the first visit's: counters span no gap
if len(first) >= 2:
    a, b = first[0][1], first[-1][1]
    dt_steps = sum(1 for at, _ in steps if first[0][0] <= at < first[-1][0])
    if dt_steps:
        for key in ("gpuflame_library_tensor_hook_seconds_total", "gpuflame_library_cupti_callback_seconds_total",
                    "gpuflame_library_thread_seconds_total"):
            if key in a and key in b:
                print(f"{key}: {(float(b[key]) - float(a[key])) * 1e6 / dt_steps:.1f} us a step "
                      f"over {dt_steps} steps")
PY
grep -iE "sheds|thrift|warning" "$out/agent.log" | head -20
echo "pushes received by the stub Pyroscope: $(cat "$out/pushes" 2>/dev/null || echo 0)"
