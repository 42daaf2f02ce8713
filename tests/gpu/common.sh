# Sourced by tests/gpu/run_*.sh: where things are on the GPU host. The build
# comes from scripts/gpu-bundle.sh (.carry/, the `device` tool's carry);
# outputs go under $OUT (the folder the device sends back), or $1's choice.
#   here root bundle out py status   (out: ${OUT:-/tmp/gpuflame-gpu}$GF_OUT_SUFFIX)
set -u
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bundle=$root/.carry
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${OUT:-/tmp/gpuflame-gpu}${GF_OUT_SUFFIX:-}
mkdir -p "$out"
py=${PYTHON:-python3}
status=0

# A free TCP port on the loopback (for the stub Pyroscope, /metrics).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# For a script that runs the agent: a stub Pyroscope on a free port ($port;
# its pushes counted in $out/pushes) and a free port for the agent's
# /metrics ($metrics_port); the stub, the agent and the workload (their pids
# in $stub, $agent, $workload) are killed on exit.
start_stub_pyroscope() {
  port=$(free_port) metrics_port=$(free_port)
  python3 "$root/bench/stub_pyroscope.py" "$port" "$out/pushes" &
  stub=$! workload='' agent=''
  trap 'kill $stub $agent $workload 2>/dev/null' EXIT
}

# The median of a --step-log's later half (train_bench.py): well after any
# switch a mode makes in its warm-up. "nan" where the run left no log.
later_half_median() {  # steps-file
  python3 -c 'import statistics,sys; ms = [float(l.split()[1]) for l in open(sys.argv[1])]
print(statistics.median(ms[len(ms) // 2:]))' "$1" 2>/dev/null || echo nan
}

# Separate processes, one a mode, alternated ROUNDS times: RUNNER MODE ROUND
# prints the run's median step, and the first of MODES is each round's
# baseline. One line a round, each mode's step and its ratio to the
# baseline's, after the last line matching SAY_PATTERN in each run's
# $out/MODE-ROUND.err.
rounds_of_modes() {  # runner, modes..., with ROUNDS and SAY_PATTERN
  local runner=$1 m ms line base
  shift
  for r in $(seq "${ROUNDS:-2}"); do
    line="round $r:" base=
    for m in "$@"; do
      ms=$("$runner" "$m" "$r")
      [ -z "$base" ] && base=$ms
      line+=$(python3 -c 'import sys; m, a, b = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]); print(f" {m} {a:.3f} ms (x{a / b:.3f})")' "$m" "$ms" "$base")
      [ -n "${SAY_PATTERN:-}" ] && grep -h "$SAY_PATTERN" "$out/$m-$r.err" 2>/dev/null | tail -1
    done
    echo "$line"
  done
}
