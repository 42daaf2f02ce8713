#!/usr/bin/env bash
# Jobs that each bring their own copy of a large library, as containers
# started from a fresh image layer do (every copy is another file to
# gpuflame: another device and inode), against the agent: does its memory
# come back once a job is gone? Each job is tests/fixtures' native_alloc on
# the simulated runtime with LIB (a copy made for it, deleted after it
# exits, as a pod's layer is) preloaded; its allocation's native stack has
# the unwinder list every file the process maps, LIB's copy included, so
# each copy's symbol table is read. Prints, after each job, the agent's
# resident memory and what /metrics says it holds and has let go.
#
#   bench/symbol_churn.sh GPUFLAME_BIN SIM_DIR LIB [JOBS] [KEEP_S]
#
# JOBS (8), KEEP_S (the agent's --symbol-keep-s: 0, or 86400 for the agent
# before it let go of anything). Root (eBPF), curl, python3; JOBS copies of
# LIB in /tmp at most one at a time.
set -euo pipefail
bin=$1 sim=$2 lib=$3 jobs=${4:-8} keep=${5:-0}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/gpuflame-symbols.XXXXXX)
source "$here/agent_common.sh"
start_agent "$bin" --window 2 --symbol-keep-s "$keep" --max-overhead 0
echo "keep ${keep}s; $(basename "$lib") $(( $(stat -c %s "$lib") >> 20 )) MiB a copy; agent RSS at start $(rss_mb) MiB"
for i in $(seq "$jobs"); do
  cp "$lib" "$work/lib.so"
  GPUFLAME_SIM_LIB_DIR=$sim LD_PRELOAD="$work/lib.so" "$sim/native_alloc" > /dev/null 2>&1 || true
  rm -f "$work/lib.so"
  sleep 7  # its last window (2 s) closes, it is retired, a sweep runs (2 s at keep 0)
  echo "after job $i: RSS $(rss_mb) MiB, symbol files $(metric gpuflame_symbol_files)" \
       "($(( $(printf '%.0f' "$(metric gpuflame_symbol_bytes)") >> 20 )) MiB with unwind tables)," \
       "released $(metric gpuflame_symbol_files_released_total), unwind tables $(metric gpuflame_unwind_tables)" \
       "released $(metric gpuflame_unwind_tables_released_total)"
done
