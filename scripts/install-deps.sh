#!/usr/bin/env bash
# Installs, from Debian packages, what gpuflame needs:
#   scripts/install-deps.sh           to build it and run the example (example.sh)
#   scripts/install-deps.sh --tests   also what the test suite needs (test.sh, CI)
# Idempotent: does nothing when every package is already there.
#
# Not from Debian: CUDA 13's CUPTI headers for kernel time (/usr/local/cuda;
# bookworm's non-free libcupti-dev is CUDA 11.8's, too old for the activity
# records gpuflame reads; without them it builds without kernel time) and
# pyenv's CPythons 3.9-3.13 for the tests of each interpreter (skipped
# without). README.md, "What a fresh machine gets".
set -euo pipefail
tests=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  *) echo "usage: $0 [--tests]" >&2; exit 2 ;;
esac
packages=(
  build-essential cmake pkg-config file  # file: CPack's Debian package (make package)
  clang llvm                      # BPF programs
  libbpf-dev bpftool              # skeletons, USDT
  libelf-dev libdw-dev zlib1g-dev libzstd-dev
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc libabsl-dev
  libcurl4-openssl-dev libcpp-httplib-dev libyaml-cpp-dev nlohmann-json3-dev
  systemtap-sdt-dev               # <sys/sdt.h>: the injection library's USDT probes
  libspdlog-dev                   # the structured log (logging/)
  python3                         # the example, and the build's lint scripts
  # The build defines the test and benchmark targets (built only when asked):
  googletest libgtest-dev libgmock-dev libbenchmark-dev
)
if [ "$tests" = 1 ]; then
  packages+=(
    libclang-rt-dev               # clang's libFuzzer and sanitizer runtimes (scripts/fuzz.sh)
    golang-go                     # `go tool pprof`, an independent pprof reader for tests
    util-linux                    # setpriv, setsid: the unprivileged-user and capability tests
    libcap2-bin                   # capsh: reads capability sets back (CapabilitiesTest)
    systemd                       # systemd-analyze verify, for the packaged unit
    chromium                      # renders Grafana's flame graph component in tests/deploy
  )
  # tests/deploy's npm packages need Node.js and npm: the machine's own when it
  # has them (NodeSource's nodejs bundles npm and conflicts with Debian's).
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpuflame: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# tests/deploy's npm packages, pinned by its package-lock.json (Debian's own
# node may be older than the machine's: whichever `npm` is first on PATH).
if [ "$tests" = 1 ]; then
  dir=$(cd "$(dirname "$0")/.." && pwd)/tests/deploy
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "gpuflame: installing tests/deploy's npm packages" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
fi
