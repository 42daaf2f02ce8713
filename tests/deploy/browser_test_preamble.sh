# The browser tests' shared start, sourced by each (tests/CMakeLists.txt,
# gpuflame_browser_test, passes them all the same arguments):
#   source "$(dirname "$0")/browser_test_preamble.sh" "$@"
# Arguments: GPUFLAME_BIN SIM_DIR WORKLOADS PYTHON OUT_DIR. Sets here, bin,
# sim, workloads, py and out; fails unless tests/deploy's npm packages are
# installed; defines record_workload.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$1 sim=$2 workloads=$3 py=$4 out=$5
if [ ! -d "$here/node_modules/playwright-core" ] || [ ! -d "$here/node_modules/@grafana/flamegraph" ]; then
  echo "tests/deploy/node_modules is missing: run ./scripts/install-deps.sh" >&2
  exit 1
fi
mkdir -p "$out"

# record_workload DIR SCRIPT [ARGS...]: `gpuflame record` into DIR (emptied
# first) of tests/workloads/SCRIPT on the simulated CUDA runtime (a fixture).
record_workload() {
  local dir=$1 script=$2
  shift 2
  rm -rf "$dir"
  GPUFLAME_SIM_LIB_DIR=$sim PYTHONPATH=$sim "$bin" record -q -o "$dir" -- "$py" "$workloads/$script" "$@"
}
