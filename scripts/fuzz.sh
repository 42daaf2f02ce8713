#!/usr/bin/env bash
# Fuzzes gpuflame's parsers of untrusted bytes (tests/fuzz/NAME_fuzzer.cc,
# one per parser) with clang's libFuzzer, AddressSanitizer and UBSan, for
# SECONDS each (default 60), one after another, then says per target how
# many inputs ran and whether one crashed.
#
#   scripts/fuzz.sh [SECONDS] [LIBFUZZER_FLAG...]       every target, e.g. scripts/fuzz.sh 600 -jobs=2 -workers=2
#   GPUFLAME_FUZZ_TARGETS="elf_file cfi" scripts/fuzz.sh 300   only these
#   scripts/fuzz.sh --list                              the targets
#
# Builds in build-libfuzzer/ (GPUFLAME_LIBFUZZER=ON, clang; only the fuzz
# targets and the libraries they link; GPUFLAME_BUILD_LOCK=FILE builds under
# flock FILE, GPUFLAME_BUILD_JOBS=N with N jobs). Each target works on a copy
# of its seed corpus (tests/fuzz/corpus/NAME/, without its crash-*
# reproducers, which stop libFuzzer at once while the bug is there) kept in
# build-libfuzzer/corpus/NAME/, so inputs it finds carry over to the next
# run. Bounds: -rss_limit_mb=2048 (also the largest single allocation) and
# -timeout=10 s per input: a parser that needs more for some input has a bug.
# A crashing input is written to build-libfuzzer/artifacts/NAME/; replay it with
#   build-libfuzzer/tests/fuzz/NAME_fuzzer FILE
# and, once understood, keep it as tests/fuzz/corpus/NAME/crash-WHAT (the
# ctest NAME_fuzzer_smoke runs every file there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# Target name, then the largest input libFuzzer makes for it (-max_len):
# room for the biggest real input of its kind and some around it.
declare -A max_len=(
  [record]=32768           # the largest valid record (a GF_EVF_USER_STACK stack copy, ~19 KB) and more
  [proc_maps]=65536
  [proc_environ]=65536
  [mountinfo]=65536
  [proc_stat]=4096
  [k8s_metadata]=65536
  [service_hints]=65536
  [elf_file]=131072        # the seeds are small real ELF files (up to ~70 KB)
  [cfi]=131072
  [dwarf_inlines]=131072
  [usdt_notes]=16384      # a library's .note.stapsdt: about 1 KB here, a few KB in libtorch
  [python_code]=16384
  [python_linetable]=8192
  [cupti_activity]=65536
  [pprof_symbolize]=65536
  [spool]=65536
  [diff]=131072            # two profiles: record's are a few KB each, others more
  [agent_config]=8192
  [trace_query]=4096
)
# Flags for one target: symbolize and the spool say a line on stderr for
# every input (close it: libFuzzer's own output and crash reports still
# come through).
declare -A extra_flags=(
  [pprof_symbolize]=-close_fd_mask=2
  [spool]=-close_fd_mask=2
)
all_targets="record proc_maps proc_environ mountinfo proc_stat k8s_metadata service_hints elf_file cfi dwarf_inlines usdt_notes python_code python_linetable
             cupti_activity pprof_symbolize spool diff agent_config trace_query"
if [ "${1:-}" = --list ]; then
  echo $all_targets
  exit 0
fi
seconds=${1:-60}
[ $# -gt 0 ] && shift
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS] [LIBFUZZER_FLAG...] | --list" >&2; exit 2; }
targets=${GPUFLAME_FUZZ_TARGETS:-$all_targets}
for t in $targets; do
  [ -n "${max_len[$t]:-}" ] || { echo "gpuflame: no fuzz target $t (scripts/fuzz.sh --list)" >&2; exit 2; }
done
build=$root/build-libfuzzer

"$root/scripts/install-deps.sh" --tests
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
# A build without kernel time (no CUDA 13 CUPTI headers: cupti/CMakeLists.txt)
# has no cupti_activity fuzzer.
if [[ " $targets " == *" cupti_activity "* ]] &&
  ! grep -q '\bcupti_activity_fuzzer\b' <<<"$(cmake --build "$build" --target help)"; then
  echo "gpuflame: no CUPTI headers in this build: cupti_activity is not fuzzed" >&2
  targets=$(echo " $targets " | sed 's/ cupti_activity / /')
fi
build_cmd=(cmake --build "$build" -j"${GPUFLAME_BUILD_JOBS:-$(nproc)}" --target)
for t in $targets; do build_cmd+=("${t}_fuzzer"); done
if [ -n "${GPUFLAME_BUILD_LOCK:-}" ]; then
  flock "$GPUFLAME_BUILD_LOCK" "${build_cmd[@]}"
else
  "${build_cmd[@]}"
fi

summary=()
failed=0
for t in $targets; do
  corpus=$build/corpus/$t
  artifacts=$build/artifacts/$t
  run=$build/run/$t  # -jobs writes its fuzz-N.log files in the working directory
  mkdir -p "$corpus" "$artifacts" "$run"
  find "$root/tests/fuzz/corpus/$t" -maxdepth 1 -type f ! -name 'crash-*' -exec cp -n -t "$corpus" {} +
  log=$build/fuzz-$t.log
  rm -f "$run"/fuzz-[0-9]*.log  # the per-job logs of an earlier -jobs run
  touch "$probe/start"          # artifacts newer than this are this run's
  echo "gpuflame: fuzzing $t for ${seconds}s over $corpus (log: $log)" >&2
  set +e
  # UBSan reports abort (a crash), but for the one kind built recoverable
  # (CMakeLists.txt, GPUFLAME_LIBFUZZER).
  (cd "$run" && UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$build/tests/fuzz/${t}_fuzzer" -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" ${extra_flags[$t]:-} "$@" \
    "$corpus") >"$log" 2>&1
  rc=$?
  # Executions: the final stats of each run (one, or one per -jobs job), else
  # the last status line (#N in the default mode, #N: with -fork).
  runs=$(grep -ho 'stat::number_of_executed_units: *[0-9]*' "$log" "$run"/fuzz-*.log 2>/dev/null |
           awk '{s += $2} END {print s + 0}')
  [ "$runs" -gt 0 ] || runs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  # UBSan's reports, one line per place and kind.
  { grep -Eoh '/[A-Za-z0-9_./+-]+:[0-9]+:[0-9]+: runtime error: [^:]*' "$log" "$run"/fuzz-[0-9]*.log 2>/dev/null ||
    true; } | sort | uniq -c | awk -v t="$t" '{n = $1; $1 = ""; print "gpuflame: " t ": UBSan, " n " times:" $0}' >&2
  crashes=$(find "$artifacts" -type f -newer "$probe/start" | wc -l)
  set -e
  line="$t: ${runs:-0} executions in ${seconds}s, corpus $(find "$corpus" -type f | wc -l) inputs"
  if [ "$crashes" -gt 0 ] || [ "$rc" -ne 0 ]; then
    line+=", $crashes crashing inputs in $artifacts/ (exit $rc; replay: $build/tests/fuzz/${t}_fuzzer FILE)"
    failed=1
  fi
  echo "gpuflame: $line" >&2
  summary+=("$line")
done
printf 'gpuflame: %s\n' "${summary[@]}" >&2
exit "$failed"
