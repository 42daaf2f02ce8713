#!/usr/bin/env bash
# NCCL under the launch route (issue 11), on the real libnccl of PyTorch's
# wheel, one rank on one GPU (nccl_one_rank.py). First, what each NCCL call
# launches on one rank (torch.profiler's names): the route's hand-back to
# the callbacks is for NCCL's own kernels (ncclDevKernel_*, ...), so the runs
# after use the first call that launches one (NCCL_OP; allreduce where none
# does). Then ROUNDS rounds of `record --launch-stacks uprobes` against
# record's default (the callbacks) on N calls: its summary's launch route,
# nccl.gpu_time and each operation's GPU time, and the library's word
# (GPUFLAME_CUPTI_DEBUG) of handing the process back. Last, the agent at its
# default (the route) on that workload found running, AGENT_S seconds, and
# 4 s of `record --pid --launch-stacks uprobes` on another: their route and
# NCCL counters, and the library's word. With the bundle from
# scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   ROUNDS (2), N (2000), AGENT_S (15), AGENT_RUNS (1), PID_RUNS (1)
GF_OUT_SUFFIX=/nccl-route . "$(dirname "$0")/common.sh"
work=$out/runs
mkdir -p "$work"
echo "== the GPU work of each call on one rank"
NCCL_LIST_KERNELS=1 "$py" "$here/nccl_one_rank.py" 1 >"$out/kernels.txt" 2>"$out/kernels.err" || status=1
cut -c1-600 "$out/kernels.txt"
op=$(python3 - "$out/kernels.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if any(g.startswith(("ncclDevKernel", "ncclSymkDevKernel", "ncclKernel")) for g in d.get("gpu", [])):
        print(d["op"])
        break
else:
    print("allreduce")
PY
)
echo "NCCL_OP=$op"
export NCCL_OP=$op

say_record() {  # folder, stderr
  python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
k = s.get("gpu_kernels", {})
n = s.get("nccl", {})
print("  gpu_kernels:", json.dumps({key: v for key, v in k.items() if not isinstance(v, (dict, list))})[:700])
print("  launch_route:", json.dumps(k.get("launch_route")))
print("  library_flush:", json.dumps(s.get("library_flush")))
print("  nccl.gpu_time:", json.dumps(n.get("gpu_time")))
ops = n.get("by_operation", [])
print("  by_operation:", json.dumps({o["operation"]: {"calls": o.get("calls"), "gpu": o.get("gpu")} for o in ops})[:700])
print("  nccl:", json.dumps({k: n.get(k) for k in ("calls", "returns", "returns_without_call", "calls_without_return")}),
      "hangs:", len(n.get("hangs", [])), "bpf nested:", s["bpf"].get("nccl_nested_calls"))
PY
  grep -hE "NCCL's kernels|launch stacks by|launch route|callbacks|NCCL launch taken|flush: asked" "$2" | sort | uniq -c | cut -c1-400 | head -12
}

for ((r = 0; r < ${ROUNDS:-2}; r++)); do
  if [ $((r % 2)) = 0 ]; then modes="uprobes callbacks"; else modes="callbacks uprobes"; fi
  for mode in $modes; do
    sleep 3  # an exited gpuflame's uprobes go a moment later
    GPUFLAME_CUPTI_DEBUG=1 "$bundle/gpuflame" record -q --launch-stacks "$mode" -o "$work/$mode$r" -- \
        "$py" "$here/nccl_one_rank.py" "${N:-2000}" >"$work/$mode$r.out" 2>"$work/$mode$r.err" ||
      { status=1; tail -5 "$work/$mode$r.err"; }
    echo "== round $r, record --launch-stacks $mode: $(cat "$work/$mode$r.out")"
    say_record "$work/$mode$r" "$work/$mode$r.err" || status=1
  done
done

start_stub_pyroscope
agent_s=${AGENT_S:-15}
start_workload() {  # seconds, name: a workload with the library, found running 5 s later
  GPUFLAME_CUPTI_DEBUG=1 CUDA_INJECTION64_PATH=$bundle/libgpuflame_cupti.so "$py" "$here/nccl_one_rank.py" 200 "$1" \
      >"$out/$2.out" 2>"$out/$2.err" &
  workload=$!
  sleep 5
}
say_library() {  # name
  wait $workload; echo "workload exited $?: $(cat "$out/$1.out")"; workload=
  grep -hE "NCCL's kernels|launch stacks by|launch route|callbacks|NCCL launch taken|flush: asked" "$out/$1.err" | sort | uniq -c | cut -c1-400 | head -12
}

for ((v = 1; v <= ${PID_RUNS:-1}; v++)); do
  echo "== record --pid --launch-stacks uprobes, 4 s, on a workload found running (run $v)"
  start_workload 12 pid-workload
  "$bundle/gpuflame" record -q -d 4 --launch-stacks uprobes -o "$work/pid$v" --pid "$workload" >"$work/pid$v.out" 2>&1 ||
    { status=1; tail -5 "$work/pid$v.out"; }
  say_record "$work/pid$v" "$work/pid$v.out" || status=1
  say_library pid-workload
  cp "$out/pid-workload.err" "$out/pid-workload$v.err"
done

for ((v = 1; v <= ${AGENT_RUNS:-1}; v++)); do
  echo "== the agent at its default (the route), $agent_s s, on another found running (run $v)"
  start_workload $((agent_s + 10)) agent-workload
  "$bundle/gpuflame" agent --pyroscope-url "http://127.0.0.1:$port" --pid "$workload" \
      --metrics-port "$metrics_port" --spool-dir "" >"$out/agent.log" 2>&1 &
  agent=$!
  sleep "$agent_s"
  metrics=$(env -u LD_LIBRARY_PATH curl -s --max-time 1 "http://127.0.0.1:$metrics_port/metrics")
  echo "the agent's /metrics: $(grep -E '^gpuflame_(kernel_launch_stacks|launch_route_[a-z_]+|library_cupti_callback_seconds|nccl_calls|nccl_hangs|gpu_lane_kernels)_total[ {]|^gpuflame_launch_route_hits_held ' <<<"$metrics" |
      grep -v unjoined | sed 's/{[^}]*}//' | tr '\n' ' ')"
  echo "  unjoined by reason: $(grep -E '^gpuflame_launch_route_unjoined_total' <<<"$metrics" |
      sed -E 's/\{.*reason="([a-z_]+)".*\}/{\1}/' | tr '\n' ' ')"
  echo "  open-file limit: $(grep 'open files' /proc/$agent/limits | tr -s ' ')"
  kill -INT $agent 2>/dev/null; wait $agent; echo "agent exited $?"; agent=
  say_library agent-workload
  grep -iE "warning|error" "$out/agent.log" | sort | uniq -c | cut -c1-300 | head -5
done
exit $status
