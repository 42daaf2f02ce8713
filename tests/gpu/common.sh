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
