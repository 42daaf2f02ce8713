#!/usr/bin/env bash
# Installs everything gpuflame needs to build and test, from Debian packages.
# Idempotent: does nothing when every package is already there.
set -euo pipefail
packages=(
  build-essential cmake pkg-config
  clang llvm                      # BPF programs
  libclang-rt-dev                 # clang's libFuzzer and sanitizer runtimes (scripts/fuzz.sh)
  libbpf-dev bpftool              # skeletons, USDT
  libelf-dev libdw-dev zlib1g-dev libzstd-dev
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc libabsl-dev
  libcurl4-openssl-dev libcpp-httplib-dev libyaml-cpp-dev nlohmann-json3-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  systemtap-sdt-dev               # <sys/sdt.h> for the simulated PyTorch's USDT probes
  golang-go                       # `go tool pprof`, an independent pprof reader for tests
  util-linux                      # setpriv, for the unprivileged-user test
  chromium                        # renders Grafana's flame graph component in tests/deploy
)
# tests/deploy's npm packages need Node.js and npm: the machine's own when it
# has them (NodeSource's nodejs bundles npm and conflicts with Debian's).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# tests/deploy's npm packages, pinned by its package-lock.json (Debian's own
# node may be older than the machine's: whichever `npm` is first on PATH).
install_npm_packages() {
  local dir
  dir=$(cd "$(dirname "$0")/.." && pwd)/tests/deploy
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "gpuflame: installing tests/deploy's npm packages" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}
if [ ${#missing[@]} -eq 0 ]; then
  install_npm_packages
  exit 0
fi
echo "gpuflame: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_npm_packages
