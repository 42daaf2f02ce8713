#!/usr/bin/env bash
# The agent's GPU figures on a real GPU: `gpuflame agent` (pushing to a stub
# Pyroscope on loopback, --window WINDOW, default 5 s) while each of
# idle_workload.py's cases runs with the injection library, as a pod the
# agent serves does (CASES, default: starved tiny matmul stream); prints the
# case's gpuflame_gpu_* series of /metrics (per GPU, and per lane: the
# verdict and its inputs), scraped mid-run, the agent's own cost figures,
# and nvidia-smi's reading at that moment. SCRAPES (seconds after the
# workload's start, default "24") scrapes more than once: each prints its
# lane and coverage series; the last prints everything. RUN_FOR (100) bounds
# the workload. With the bundle from scripts/gpu-bundle.sh in .carry/; output
# under $OUT.
GF_OUT_SUFFIX=/agent-gpus . "$(dirname "$0")/common.sh"
# Steps for ~25 s a case: the scrape (SCRAPES, 24 s) must come after
# the import, the 5 s start-up and a few judged windows (at 15 s, matmul had
# none yet on the H200).
declare -A steps=([starved]=${STARVED_STEPS:-900} [tiny]=${TINY_STEPS:-8000} [matmul]=${MATMUL_STEPS:-1500} [stream]=${STREAM_STEPS:-2400})
for case in ${CASES:-starved tiny matmul stream}; do
  echo "== $case"
  port=$(free_port) metrics=$(free_port)
  python3 "$root/bench/stub_pyroscope.py" "$port" &
  stub=$!
  timeout -s INT $((${RUN_FOR:-100} + 20)) "$bundle/gpuflame" agent --pyroscope-url "http://127.0.0.1:$port" --metrics-port "$metrics" \
      --metrics-address 127.0.0.1 --node h200 --window "${WINDOW:-5}" 2>"$out/agent-$case.log" &
  agent=$!
  sleep 3
  # ONE_IN: the library's activity duty cycle (1 s on in ONE_IN, default
  # the agent's 10): a short case may fall between two on-spans at 10.
  GPUFLAME_ACTIVITY_ONE_IN=${ONE_IN:-10} CUDA_INJECTION64_PATH=$bundle/libgpuflame_cupti.so \
    timeout ${RUN_FOR:-100} $py "$here/idle_workload.py" "$case" \
      "${steps[$case]}" >"$out/workload-$case.json" &
  work=$!
  slept=0
  for at in ${SCRAPES:-24}; do
    sleep $((at - slept)); slept=$at
    # Not with the bundle's libraries: the host's curl and python are not built against them.
    env -u LD_LIBRARY_PATH python3 -c "
import urllib.request; open('$out/metrics-$case.txt','wb').write(urllib.request.urlopen('http://127.0.0.1:$metrics/metrics', timeout=5).read())" ||
      status=1
    echo "-- at ${at} s: $(grep -c '^gpuflame_gpu_lane_' "$out/metrics-$case.txt") lane series"
    grep '^gpuflame_gpu_lane_\(observed\|coverage\|busy\|idle_gap\|verdict\)' "$out/metrics-$case.txt" | head -8
  done
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=utilization.gpu,utilization.memory,power.draw,clocks.sm --format=csv,noheader
  grep "^gpuflame_gpu_" "$out/metrics-$case.txt" | grep -v "_bucket\|^# " | head -60 || { echo "no gpuflame_gpu_ series"; status=1; }
  grep "^gpuflame_overhead\|^gpuflame_shedding\|^gpuflame_self_" "$out/metrics-$case.txt" | head -12
  wait $work || status=1
  cat "$out/workload-$case.json"
  kill -INT $agent 2>/dev/null; wait $agent
  kill $stub 2>/dev/null; wait $stub 2>/dev/null
  grep -i "gpu figures\|error" "$out/agent-$case.log" | head -5
done
exit $status
