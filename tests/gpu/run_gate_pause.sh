#!/usr/bin/env bash
# The agent's gate on a real GPU host (the H200 `device` machine): how long
# the first process that maps a CUDA / PyTorch / libpython file the agent has
# not attached to yet is held, and that later processes on the same files are
# not held. Times a short PyTorch process (import, one allocation, exit)
# without the agent, then RUNS times with it (the first one meets the gates),
# and reads the agent's /metrics. Carries a build from scripts/gpu-bundle.sh
# (.carry/). Output goes to $OUT.   RUNS (4), PORT (9400)
. "$(dirname "$0")/common.sh"
port=${PORT:-9400}
short() {
  local t0 t1
  t0=$(date +%s%N)
  $py -c 'import torch; x = torch.empty(1 << 20, device="cuda"); torch.cuda.synchronize()' || status=1
  t1=$(date +%s%N)
  echo "$1: $(( (t1 - t0) / 1000000 )) ms"
}
metrics() {
  $py - "$port" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
for line in text.splitlines():
    if line.startswith(("gpuflame_gate", "gpuflame_gated", "gpuflame_processes", "gpuflame_events_total")):
        print(line)
PY
}
echo "== without the agent"
for i in 1 2 3; do short "plain $i"; done
echo "== with the agent (started after the plain runs: no process holds these files)"
"$bundle/gpuflame" agent --pyroscope-url http://127.0.0.1:9 --spool-dir "" --metrics-port "$port" --window 5 \
  > "$out/agent.log" 2>&1 &
agent=$!
for _ in $(seq 1 100); do metrics > /dev/null 2>&1 && break; sleep 0.2; done
metrics || status=1
for i in $(seq 1 "${RUNS:-4}"); do short "with agent $i"; metrics; done
kill -INT "$agent"; wait "$agent" || status=1
tail -5 "$out/agent.log"
exit $status
