#!/usr/bin/env bash
# The whole test suite: unit tests and end-to-end tests with real eBPF
# against real CPython processes (on the simulated CUDA runtime, a fixture).
# Installs the build's and the tests' packages first (scripts/install-deps.sh).
# End-to-end tests need root, and pyenv's CPythons 3.9-3.13 in ~/.pyenv for
# the tests of each interpreter: without them those tests are skipped, each
# saying why (ctest lists them). GPUFLAME_REQUIRE_E2E=1 (CI's .ci/run) makes
# any such skip a failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
if [ "$(id -u)" -ne 0 ]; then
  echo "gpuflame: not root: end-to-end tests will be skipped (run with sudo for all)" >&2
fi
cd "$root/build"
ctest --output-on-failure -j2
