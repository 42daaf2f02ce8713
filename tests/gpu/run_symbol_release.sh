#!/usr/bin/env bash
# Library tables let go on the GPU host (session 44): the agent, machine-wide
# with 2-s windows and --symbol-keep-s KEEP (0), while RUNS (2) runs of the
# launch-bound GPT (tests/gpu/train_bench.py) follow one another, RUN_S (10)
# seconds each. Its first device allocations' native stacks have the
# unwinder list every library the process maps (libtorch, cuDNN, cuBLAS...),
# so their symbol and unwind tables are read. Printed while each run runs
# and 8 s after it exits (its last window, its retirement, a sweep): what the
# agent holds (files, bytes, unwind tables), what it has released, its RSS.
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   KEEP (0), RUNS (2), RUN_S (10); FAKE=1 sleeps instead of training (to try it without a GPU)
GF_OUT_SUFFIX=/symbol-release . "$(dirname "$0")/common.sh"
start_stub_pyroscope
"$bundle/gpuflame" agent --pyroscope-url "http://127.0.0.1:$port" --metrics-port "$metrics_port" --spool-dir "" \
    --window 2 --symbol-keep-s "${KEEP:-0}" --max-overhead 0 > "$out/agent.log" 2>&1 &
agent=$!
for _ in $(seq 300); do grep -q "agent pushing to" "$out/agent.log" && break; sleep 0.1; done
grep -q "agent pushing to" "$out/agent.log" || { tail -20 "$out/agent.log"; exit 1; }
show() {  # what the agent holds, from its /metrics and /proc
  python3 - "$metrics_port" "$agent" "$1" <<'PY'
import sys, urllib.request
port, pid, what = sys.argv[1:]
m = {}
for line in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode().splitlines():
    if line and not line.startswith("#"):
        k, _, v = line.rpartition(" ")
        m[k] = float(v)
rss = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS"))
g = lambda k: int(m.get(k, -1))
print(f"{what}: RSS {rss >> 10} MiB; symbol files {g('gpuflame_symbol_files')}, "
      f"{g('gpuflame_symbol_bytes') / 2**20:.1f} MiB with unwind tables ({g('gpuflame_unwind_tables')}); "
      f"released: files {g('gpuflame_symbol_files_released_total')}, "
      f"tables {g('gpuflame_unwind_tables_released_total')}; unwinds {g('gpuflame_unwinds_total')}")
PY
}
show "before any run"
for ((r = 1; r <= ${RUNS:-2}; r++)); do
  "$py" "$here/train_bench.py" ${FAKE:+--fake --fake-ms 10} --steps 100000 > "$out/workload$r.out" 2>&1 &
  workload=$!
  sleep "${RUN_S:-10}"
  show "run $r, running"
  kill $workload 2>/dev/null; wait $workload 2>/dev/null; workload=
  sleep 8
  show "run $r, 8 s after its exit"
done
exit $status
