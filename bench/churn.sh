#!/usr/bin/env bash
# Process churn against the agent: RATE short CUDA processes per minute
# (tests/fixtures' native_alloc on the simulated runtime: map libcudart,
# allocate 12 MiB, exit) for SECONDS, the agent at its defaults pushing to a
# stand-in Pyroscope on loopback. Prints what the issue of churn asks about:
# pushes dropped or rejected, records lost, processes still attached and
# allocations still live once every process has exited (both should be 0),
# exits inferred (exit records lost), and the agent's resident memory at
# start, at its peak and at the end.
#
#   bench/churn.sh GPUFLAME_BIN SIM_DIR [RATE] [SECONDS]
#
# RATE (5000 per minute), SECONDS (60). Root (eBPF), curl, python3.
set -euo pipefail
bin=$1 sim=$2 rate=${3:-5000} seconds=${4:-60}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/gpuflame-churn.XXXXXX)
source "$here/agent_common.sh"
start_agent "$bin"
rss0=$(rss_mb) peak=$rss0

interval=$(python3 -c "print(60.0 / $rate)")
end=$(( $(date +%s) + seconds ))
started=0
kids=()
while (( $(date +%s) < end )); do
  GPUFLAME_SIM_LIB_DIR=$sim "$sim/native_alloc" > /dev/null 2>&1 &
  kids+=($!)
  started=$((started + 1))
  if (( ${#kids[@]} >= 200 )); then
    r=$(rss_mb); (( r > peak )) && peak=$r
    wait "${kids[@]}" || true  # reap: no more than 200 in flight
    kids=()
  fi
  sleep "$interval"
done
(( ${#kids[@]} == 0 )) || wait "${kids[@]}" || true
sleep 13  # the last windows (10 s) close, the exit sweep runs
r=$(rss_mb); (( r > peak )) && peak=$r
echo "processes started: $started in ${seconds}s ($(( started * 60 / seconds ))/min); pushes received: $(cat "$work/pushes" 2>/dev/null || echo 0)"
echo "after they all exited: attached=$(metric gpuflame_processes_attached) live_allocations=$(metric gpuflame_live_allocations)" \
     "processes known=$(metric gpuflame_processes_known) stacks=$(metric gpuflame_stacks) frames=$(metric gpuflame_frames)"
echo "pushes dropped (queue full)=$(metric gpuflame_push_dropped_queue_full_total) rejected=$(metric gpuflame_push_rejected_total) given up=$(metric gpuflame_push_given_up_total) profiles pushed=$(metric gpuflame_push_series_pushed_total)" \
     "records lost=$(metric gpuflame_lost_records_total) exits inferred=$(metric gpuflame_process_exits_inferred_total)"
echo "agent RSS MiB: start=$rss0 peak=$peak end=$(rss_mb)"
