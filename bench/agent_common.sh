# Sourced by the agent benchmarks (churn.sh, symbol_churn.sh): a Pyroscope
# stand-in on loopback, the agent started against it, what they read of it,
# and the cleanup on exit (every process started through $pids killed,
# $work removed). The caller sets $here (bench/) and $work (a scratch
# directory of its own), and has curl and python3.

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
metric() { curl -s --max-time 5 "http://127.0.0.1:$mport/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
rss_mb() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' /proc/"$agent"/status; }

# start_agent BIN [AGENT_ARGS...]: the stub (counting pushes in
# $work/pushes) and the agent, memory-only spool, metrics on $mport; sets
# $agent. Returns once it pushes; prints its log and fails if it does not.
start_agent() {
  local bin=$1
  shift
  local pport
  pport=$(free_port)
  python3 "$here/stub_pyroscope.py" "$pport" "$work/pushes" &
  pids+=($!)
  mport=$(free_port)
  "$bin" agent --pyroscope-url "http://127.0.0.1:$pport" --metrics-port "$mport" --metrics-address 127.0.0.1 \
    --node bench --spool-dir "" "$@" 2> "$work/agent.log" &
  agent=$!
  pids+=($agent)
  for _ in $(seq 200); do grep -q "agent pushing to" "$work/agent.log" && break; sleep 0.05; done
  grep -q "agent pushing to" "$work/agent.log" || { cat "$work/agent.log"; return 1; }
}
