#!/usr/bin/env bash
# Builds the agent image from build/ (what ./scripts/build.sh produced and the
# tests ran against). Needs a Docker engine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-ghcr.io/gpuflame/gpuflame:0.1.0}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$root/Dockerfile" "$root/scripts/gpuflame-install-cupti" "$ctx/"
cp "$root/build/gpuflame" "$root/build/libgpuflame_cupti.so" "$ctx/"
strip --strip-debug "$ctx/gpuflame" "$ctx/libgpuflame_cupti.so"
docker build -t "$tag" "$ctx"
echo "built $tag"
