#!/usr/bin/env bash
# The whole test suite: unit tests and end-to-end tests with real eBPF
# against real CPython processes (on the simulated CUDA runtime, a fixture).
# End-to-end tests need root; as root a skipped one is a failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
if [ "$(id -u)" -eq 0 ]; then
  export GPUFLAME_REQUIRE_E2E=1
else
  echo "gpuflame: not root: end-to-end tests will be skipped (run with sudo for all)" >&2
fi
cd "$root/build"
ctest --output-on-failure -j2
