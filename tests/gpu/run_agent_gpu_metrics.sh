#!/usr/bin/env bash
# The agent's GPU figures on a real GPU: `gpuflame agent` (pushing to a stub
# Pyroscope on loopback) while idle_workload.py matmul runs; prints every
# gpuflame_gpu_* series of /metrics, scraped mid-run, and nvidia-smi's own
# reading at that moment. With the bundle from scripts/gpu-bundle.sh in
# .carry/; output under $OUT.
GF_OUT_SUFFIX=/agent-gpus . "$(dirname "$0")/common.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port) metrics=$(free_port)
python3 "$root/bench/stub_pyroscope.py" "$port" &
stub=$!
timeout -s INT 120 "$bundle/gpuflame" agent --pyroscope-url "http://127.0.0.1:$port" --metrics-port "$metrics" --metrics-address 127.0.0.1 \
    --node h200 2>"$out/agent.log" &
agent=$!
trap 'kill $stub $agent 2>/dev/null' EXIT
sleep 3
timeout 100 $py "$here/idle_workload.py" matmul ${MATMUL_STEPS:-400} &
work=$!
sleep ${SCRAPE_AFTER:-12}
# Not with the bundle's libraries: the host's curl and python are not built against them.
env -u LD_LIBRARY_PATH python3 -c "
import urllib.request; open('$out/metrics.txt','wb').write(urllib.request.urlopen('http://127.0.0.1:$metrics/metrics', timeout=5).read())" ||
  status=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=utilization.gpu,power.draw,clocks.sm --format=csv,noheader
grep "^gpuflame_gpu_" "$out/metrics.txt" || { echo "no gpuflame_gpu_ series"; status=1; }
wait $work || status=1
kill -INT $agent; wait $agent
grep -i "gpu figures\|error" "$out/agent.log" | head -5
exit $status
