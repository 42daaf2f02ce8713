#!/usr/bin/env bash
# Collects the gpuflame binary and the shared libraries it needs that a GPU
# host may lack into .carry/ (ignored by git), for the `device` tool's carry.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rm -rf "$root/.carry" && mkdir -p "$root/.carry/lib"
cp "$build/gpuflame" "$build/bench/gpuflame_overhead" "$build/libgpuflame_cupti.so" "$root/.carry/"
ldd "$build/gpuflame" "$build/bench/gpuflame_overhead" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
    *) cp -L -n "$lib" "$root/.carry/lib/" ;;
  esac
done
# Benchmarks that run there too (tests/gpu/run_nccl_one_rank.sh), and the
# simulated NCCL one of them calls: the GPU host has no compiler.
mkdir -p "$root/.carry/bench"
cc -O2 -o "$root/.carry/bench/nccl_call_cost" "$root/bench/nccl_call_cost.c" -ldl
cc -O2 -o "$root/.carry/bench/io_syscall_cost" "$root/bench/io_syscall_cost.c"
cc -O2 -o "$root/.carry/bench/clock_cost" "$root/bench/clock_cost.c"
cp -L "$build/cuda_sim/libnccl.so.2" "$root/.carry/bench/"
# The injection library's per-event benchmarks (tests/gpu/run_host_benchmarks.sh)
# and the simulated CUDA libraries they load (found beside each other: $ORIGIN).
cp "$build/bench/gpuflame_tensor_hook_benchmark" "$build/bench/gpuflame_launch_callback_benchmark" \
  "$build/bench/gpuflame_launch_uprobes" "$root/.carry/bench/"
mkdir -p "$root/.carry/bench/sim"
for lib in libc10.so libc10_cuda.so libcuda.so.1 libcudart.so.13 libcupti.so.13; do
  cp -L "$build/cuda_sim/$lib" "$root/.carry/bench/sim/"
done
# The CUPTI client with none of gpuflame in it (tests/gpu/cupti_toggle.c:
# run_toggle_hunt.sh, run_cupti_correlation.sh), built against CUDA's headers here.
cc -O1 -g -shared -fPIC -I/usr/local/cuda/include -o "$root/.carry/libcupti_toggle.so" "$root/tests/gpu/cupti_toggle.c" \
  -ldl -lpthread
# The CUPTI client that turns on API activity records (tests/gpu/api_records.c:
# run_launch_route.sh).
cc -O1 -g -shared -fPIC -I/usr/local/cuda/include -o "$root/.carry/libapi_records.so" "$root/tests/gpu/api_records.c" -ldl
# The crash reporter for runs on the device (tests/gpu/segv_backtrace.c).
cc -O1 -g -shared -fPIC -o "$root/.carry/libsegv_backtrace.so" "$root/tests/gpu/segv_backtrace.c"
# Debug info stays on this machine: the transfer to the GPU host is bounded.
strip --strip-debug "$root/.carry/gpuflame" "$root/.carry/gpuflame_overhead" "$root/.carry/libgpuflame_cupti.so" \
  "$root/.carry/lib/"* "$root/.carry/bench/"gpuflame_* "$root/.carry/bench/sim/"* 2>/dev/null || true
du -sh "$root/.carry"
