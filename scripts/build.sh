#!/usr/bin/env bash
# Configures and builds gpuflame into build/ (RelWithDebInfo):
#   scripts/build.sh              everything: gpuflame, its tests and benchmarks
#   scripts/build.sh TARGET...    only these targets (example.sh: what the example runs)
# Installs what it needs first (scripts/install-deps.sh: the tests' tools only
# for a whole build). The compiler's progress shows; configure's chatter does
# not, but its warnings (no CUPTI, say) and errors do.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
  "$root/scripts/install-deps.sh" --tests
else
  "$root/scripts/install-deps.sh"
fi
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$root/build" -j"$(nproc)" "${targets[@]}"
