# The gpuflame agent image, built from the very binaries the test suite ran
# against (no second build): run ./scripts/build.sh, then
#   ./scripts/docker-image.sh [TAG]
# which stages build/ outputs and this file into a context and runs
# `docker build`. Debian 12, like the build machine, so the shared libraries
# below are the ones the binaries were linked against (tests/deploy checks
# that this list covers every library `ldd gpuflame` names).
FROM debian:bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      libbpf1 libelf1 libdw1 libzstd1 zlib1g \
      libprotobuf32 libgrpc++1.51 libabsl20220623 \
      libcurl4 libcpp-httplib0.11 libyaml-cpp0.7 \
      libspdlog1.10 libfmt9 \
 && rm -rf /var/lib/apt/lists/*

COPY gpuflame /usr/local/bin/gpuflame
# For workloads that opt in to kernel time; the chart's init container
# copies it to the node (cuptiLibrary.hostPath).
COPY libgpuflame_cupti.so /usr/local/lib/gpuflame/libgpuflame_cupti.so
COPY gpuflame-install-cupti /usr/local/bin/gpuflame-install-cupti

# Runs as root with only the capabilities the chart grants (see values.yaml).
ENTRYPOINT ["/usr/local/bin/gpuflame"]
CMD ["agent", "--help"]
