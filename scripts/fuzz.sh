#!/usr/bin/env bash
# Fuzzes the ring-buffer record decoder (tests/fuzz/record_fuzzer.cc:
# EventProcessor::OnRecord, tensor batches included) with clang's libFuzzer,
# AddressSanitizer and UBSan, for SECONDS (default 60), then says how many
# inputs ran and whether one crashed.
#
#   scripts/fuzz.sh [SECONDS] [LIBFUZZER_FLAG...]    e.g. scripts/fuzz.sh 600 -jobs=2 -workers=2
#
# Builds in build-libfuzzer/ (GPUFLAME_LIBFUZZER=ON, clang; only the fuzz
# target and the libraries it links). The fuzzer works on a copy of the seed
# corpus (tests/fuzz/corpus/record/, without its crash-* reproducers, which
# stop libFuzzer at once while the bug is there) kept in
# build-libfuzzer/corpus/record/, so inputs it finds carry over to the next run.
# A crashing input is written to build-libfuzzer/artifacts/; replay it with
#   build-libfuzzer/tests/fuzz/record_fuzzer FILE
# and, once understood, keep it as tests/fuzz/corpus/record/crash-NAME (the
# ctest RecordFuzzerSmoke runs every file there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
[ $# -gt 0 ] && shift
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS] [LIBFUZZER_FLAG...]" >&2; exit 2; }
build=$root/build-libfuzzer

"$root/scripts/install-deps.sh"
for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "gpuflame: fuzz.sh needs $tool (Debian: clang)" >&2; exit 1; }
done
# libFuzzer's runtime ships apart from clang in Debian (libclang-rt-dev, a
# Recommends that --no-install-recommends skips): check that it links.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cc"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>"$probe/err"; then
  cat "$probe/err" >&2
  echo "gpuflame: clang cannot link libFuzzer: install its runtime (Debian: libclang-rt-dev)" >&2
  exit 1
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  # Warnings stay warnings: clang warns where the default compiler does not.
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DGPUFLAME_LIBFUZZER=ON -DGPUFLAME_BUILD_BENCH=OFF -DGPUFLAME_WERROR=OFF >/dev/null
fi
cmake --build "$build" --target record_fuzzer -j"$(nproc)"

corpus=$build/corpus/record
mkdir -p "$corpus" "$build/artifacts"
find "$root/tests/fuzz/corpus/record" -maxdepth 1 -type f ! -name 'crash-*' -exec cp -n -t "$corpus" {} +
log=$build/fuzz.log
rm -f "$build"/fuzz-[0-9]*.log  # the per-job logs of an earlier -jobs run
touch "$probe/start"            # artifacts newer than this are this run's
echo "gpuflame: fuzzing for ${seconds}s over $corpus (log: $log)" >&2
set +e
# -max_len: the largest valid record (a GF_EVF_USER_STACK stack copy, ~19 KB)
# and some records around it. UBSan reports abort (a crash), but for the
# one kind built recoverable (CMakeLists.txt, GPUFLAME_LIBFUZZER).
# Run in the build directory: -jobs writes its fuzz-N.log files there.
(cd "$build" && UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  "$build/tests/fuzz/record_fuzzer" -max_total_time="$seconds" -max_len=32768 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$@" "$corpus") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# Executions: the final stats of each run (one, or one per -jobs job), else
# the last status line (#N in the default mode, #N: with -fork).
runs=$(grep -ho 'stat::number_of_executed_units: *[0-9]*' "$log" "$build"/fuzz-*.log 2>/dev/null |
         awk '{s += $2} END {print s + 0}')
[ "$runs" -gt 0 ] || runs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
echo "gpuflame: ${runs:-0} executions (limit ${seconds}s); corpus now $(find "$corpus" -type f | wc -l) inputs" >&2
# UBSan's reports, one line per place and kind.
{ grep -Eoh '/[A-Za-z0-9_./+-]+:[0-9]+:[0-9]+: runtime error: [^:]*' "$log" "$build"/fuzz-[0-9]*.log 2>/dev/null ||
  true; } | sort | uniq -c | awk '{n = $1; $1 = ""; print "gpuflame: UBSan, " n " times:" $0}' >&2
crashes=$(find "$build/artifacts" -type f -newer "$probe/start" | wc -l)
set -e
if [ "$crashes" -gt 0 ]; then
  echo "gpuflame: $crashes crashing inputs in $build/artifacts/ (replay: $build/tests/fuzz/record_fuzzer FILE)" >&2
  rc=1
fi
exit "$rc"
