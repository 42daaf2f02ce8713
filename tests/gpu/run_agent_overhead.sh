#!/usr/bin/env bash
# The agent's cost on a real GPU (issue 11, target 2): the real `gpuflame
# agent` process at its defaults (kernel time with CUPTI activity
# duty-cycled, tensor events in-process and sampled, CPU samples at 97 Hz,
# windows closed and pushed to a stub Pyroscope on loopback), switched on and
# off between rounds of one training process (bench/overhead_harness.cc),
# beside record's exact mode, PyTorch's recorder and a placebo round that
# changes nothing: its spread is this host's noise, below which no ratio here
# says anything. Each ratio's mean comes with a 95% bootstrap interval.
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   ROUNDS (16), ITERS (100) for the launch-bound GPT; LARGE_ROUNDS (5),
#   LARGE_ITERS (10) for the ~1B-parameter one, LARGE_MODES (default: the
#   same five: target 1's realistic step); SKIP_LAUNCH, SKIP_LARGE;
#   MODES for the launch-bound GPT's (default: all five); AGENT_BUILD, a
#   folder with another build's gpuflame, gpuflame_overhead and
#   libgpuflame_cupti.so (the shared libraries stay the bundle's), to
#   compare builds on one host.
GF_OUT_SUFFIX=/agent-overhead . "$(dirname "$0")/common.sh"
build=${AGENT_BUILD:-$bundle}
port=$(free_port)
python3 "$root/bench/stub_pyroscope.py" "$port" "$out/pushes" &
stub=$!
trap 'kill $stub 2>/dev/null' EXIT
harness() {
  "$build/gpuflame_overhead" --python "$py" --workload "$root/bench/step_workload.py" --kernel-time \
      --injection "$build/libgpuflame_cupti.so" --agent "$build/gpuflame" \
      --pyroscope-url "http://127.0.0.1:$port" "$@" || status=1
}
if [ -z "${SKIP_LAUNCH:-}" ]; then
  echo "== launch-bound GPT: the agent at its defaults, record's exact mode, PyTorch's recorder, placebo"
  harness --modes "${MODES:-none,placebo,agent,inprocess-exact,history-python}" \
      --rounds "${ROUNDS:-16}" --iters "${ITERS:-100}"
fi
if [ -z "${SKIP_LARGE:-}" ]; then
  echo "== ~1B-parameter GPT: ${LARGE_MODES:-none,placebo,agent,inprocess-exact,history-python}"
  GPUFLAME_BENCH_MODEL=large harness --modes "${LARGE_MODES:-none,placebo,agent,inprocess-exact,history-python}" \
      --rounds "${LARGE_ROUNDS:-5}" --iters "${LARGE_ITERS:-10}"
fi
echo "pushes received by the stub Pyroscope: $(cat "$out/pushes" 2>/dev/null || echo 0)"
exit $status
