#!/usr/bin/env bash
# Two or more builds of the agent and its injection library compared on one
# GPU host, their runs alternated so that the host's drift lands on each
# alike: run_agent_overhead.sh (the launch-bound GPT; none, placebo and the
# agent at its defaults) once per build per pass, with AGENT_BUILD naming the
# build. Each build is a folder under .carry/ holding its gpuflame,
# gpuflame_overhead and libgpuflame_cupti.so (stripped; the shared libraries
# stay the bundle's), "bundle" for the bundle itself:
#   BUILDS="bundle alt-old" PASSES=2 ROUNDS=5 tests/gpu/run_agent_builds.sh
# Prints each run's step-time table and the agent's own account per step.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
for pass in $(seq "${PASSES:-2}"); do
  for b in ${BUILDS:-bundle}; do
    dir=$root/.carry
    [ "$b" != bundle ] && dir=$root/.carry/$b
    echo "=== pass $pass, build $b"
    AGENT_BUILD=$dir ROUNDS=${ROUNDS:-5} ITERS=${ITERS:-100} SKIP_LARGE=1 MODES=none,placebo,agent \
      bash "$here/run_agent_overhead.sh" 2>&1 |
      grep -E "^  (none|placebo|agent) |seconds_total +[0-9.]+ us|overhead_ratio|sampled_tensor|hook_calls"
  done
done
