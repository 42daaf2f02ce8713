#!/usr/bin/env bash
# Ring-buffer drops while the agent closes windows over many processes.
#
#   bench/agent_drops.sh GPUFLAME_BIN SIM_DIR [PROCS] [RATE] [SECONDS] [STACKS] [LIVE] [PYTHON]
#
# Starts `GPUFLAME_BIN agent` (machine-wide, 1 s windows) pushing to a stub
# Pyroscope on loopback, then PROCS (50) processes of bench/drops_workload.py
# on the simulated CUDA runtime (SIM_DIR: build*/cuda_sim), each keeping LIVE
# (1000) tensors from as many call sites and allocating RATE (200) tensors/s
# from STACKS (100) of them. Two phases:
#   start-up  until every process is attached and has allocated its live set
#             (a burst of new stacks), plus 5 s;
#   steady    SECONDS (20) of 1 s windows, each closed over PROCS processes.
# For each it reports what the BPF programs dropped because the ring buffer
# was full (GF_STAT_RINGBUF_FULL, what gpuflame_ringbuf_dropped_total shows)
# and the events they sent (GF_STAT_EVENTS), read from the agent's BPF stats
# map with bpftool rather than from /metrics (an agent whose loop stalls also
# publishes its metrics late); then, when the agent has them, the window
# close timings and the reader/export thread counters, and the agent's CPU
# time per thread. Loopback only; at most 55 s of load (the workloads stop
# themselves). Root (eBPF), bpftool, curl, python3.
#
# Run it with the binary before and after a change, alternating, on the same
# load. AGENT_ARGS adds agent options: "--native-stacks all" (a copy of the
# user stack with every allocation: ~19.5 KB records that fill the ring fast)
# makes window closes show up as drops on a small machine.
set -euo pipefail

bin=$1 sim=$2 procs=${3:-50} rate=${4:-200} seconds=${5:-20} stacks=${6:-100} live=${7:-1000}
python=${8:-$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 2>/dev/null | head -1)}
(( seconds <= 35 )) || { echo "SECONDS must be at most 35 (the workloads stop after 55 s)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/gpuflame-drops.XXXXXX)
pids=()
cleanup() {
  touch "$work/stop"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
metric() {  # metric NAME -> value (empty if absent)
  curl -s --max-time 5 "http://127.0.0.1:$mport/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
stats_map=""
bpf_stat() {  # bpf_stat INDEX -> the agent's per-CPU counter summed (enum gf_stat)
  if [[ -z $stats_map ]]; then  # the map named "stats" among the agent's descriptors
    for id in $(awk '/^map_id/ { print $2 }' /proc/"$agent"/fdinfo/* 2>/dev/null | sort -un); do
      if [[ $(bpftool -j map show id "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])') == stats ]]; then
        stats_map=$id
        break
      fi
    done
  fi
  bpftool -j map lookup id "$stats_map" key "$1" 0 0 0 |
    python3 -c 'import json,sys; print(sum(v["value"] for v in json.load(sys.stdin)["formatted"]["values"]))'
}

# A Pyroscope stand-in: takes every push, answers 200, keeps nothing.
pport=$(free_port)
python3 "$here/stub_pyroscope.py" "$pport" &
pids+=($!)

mport=$(free_port)
"$bin" agent --pyroscope-url "http://127.0.0.1:$pport" --window 1 --metrics-port "$mport" \
  --metrics-address 127.0.0.1 --node bench --spool-dir "$work/spool" ${AGENT_ARGS:-} 2> "$work/agent.log" &
agent=$!
pids+=($agent)
for _ in $(seq 200); do grep -q "agent pushing to" "$work/agent.log" && break; sleep 0.05; done
grep -q "agent pushing to" "$work/agent.log" || { cat "$work/agent.log"; exit 1; }

for i in $(seq "$procs"); do
  GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim PYTHONDONTWRITEBYTECODE=1 \
    "$python" "$here/drops_workload.py" "$rate" 55 "$stacks" "$live" "$work/stop" &
  pids+=($!)
done
# Start-up: every process attached (its live set is allocated right after).
for _ in $(seq 100); do
  [[ "$(metric gpuflame_processes_attached)" -ge "$procs" ]] 2>/dev/null && break
  sleep 0.1
done
sleep 5
thread_cpu() {  # "name=seconds ..." of CPU (user+sys) per agent thread
  for t in /proc/"$agent"/task/*; do
    awk -v n="$(cat "$t/comm")" -v hz="$(getconf CLK_TCK)" '{ printf "%s=%.2f ", n, ($14 + $15) / hz }' "$t/stat"
  done
}
d0=$(bpf_stat 1) e0=$(bpf_stat 0) c0=$(thread_cpu) w0=$(metric gpuflame_reader_queue_full_waits_total)
sleep "$seconds"
d1=$(bpf_stat 1) e1=$(bpf_stat 0) c1=$(thread_cpu)
attached=$(metric gpuflame_processes_attached)
snap=$(metric gpuflame_window_snapshot_seconds) exp=$(metric gpuflame_window_export_seconds)
rdrop=$(metric gpuflame_reader_dropped_total) w1=$(metric gpuflame_reader_queue_full_waits_total)
edrop=$(metric gpuflame_export_dropped_total)
echo "${AGENT_ARGS:+[$AGENT_ARGS] }procs=$procs attached=$attached rate=$rate/s/proc stacks=$stacks live=$live" \
     "start-up: events=$e0 ringbuf_dropped=$d0; steady ${seconds}s: events=$((e1 - e0)) ringbuf_dropped=$((d1 - d0))" \
     "${snap:+window_snapshot_s=$snap window_export_s=$exp reader_dropped=$rdrop reader_full_waits=${w0:-0}+$((${w1:-0} - ${w0:-0})) export_dropped=$edrop}"
echo "  agent CPU seconds per thread, start: $c0"
echo "                                end: $c1"
