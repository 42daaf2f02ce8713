#!/usr/bin/env bash
# The launch-route tools of run_launch_route.sh, checked where CI can run
# them: on the simulated CUDA driver, runtime and CUPTI, with real uprobes
# (bench/launch_uprobes.cc) on the simulated libcuda.so.1 and real Python
# threads launching through both APIs. Whatever the device run reads first
# goes through this: the CUPTI client's records (tests/gpu/api_records.c),
# the clock lines and the join (tests/gpu/join_launches.py). The simulated
# CUPTI's times say nothing of a GPU's; only that the tools agree. Then
# run_copy_correlation.sh's: the copies' records (API_RECORDS=copies), hits on
# the copy entry points (--symbols) and tests/gpu/copy_correlation.py.
#   check_launch_route_sim.sh LAUNCH_UPROBES API_RECORDS_SO SIM_DIR
set -eu
uprobes=$1 records_so=$2 sim=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
"$uprobes" --lib "$sim/libcuda.so.1" --out "$tmp/hits.txt" --ready "$tmp/ready" > "$tmp/uprobes.txt" 2> "$tmp/uprobes.err" &
pid=$!
for _ in $(seq 100); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
[ -e "$tmp/ready" ] || { echo "launch_uprobes did not attach:"; cat "$tmp/uprobes.err"; exit 1; }
CUDA_INJECTION64_PATH=$records_so API_RECORDS=driver API_RECORDS_OUT=$tmp/records.txt PYTHONPATH=$sim \
  python3 -c '
import threading
import sim_torch
def work():
    for _ in range(300):
        sim_torch.launch("k", 1)        # cudaLaunchKernel, the driver call inside it
    for _ in range(100):
        sim_torch.launch_driver("k", 1)  # cuLaunchKernel alone, as Triton launches
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
' 2> "$tmp/workload.err" || { cat "$tmp/workload.err"; exit 1; }
kill -INT "$pid"; wait "$pid"; pid=
cat "$tmp/uprobes.txt" "$tmp/workload.err"
grep -q "api_records: 1200 kernel records, 0 copy and memset records, 1200 driver API records" "$tmp/workload.err" ||
  { echo "expected 1200 kernel and 1200 driver launch records"; exit 1; }
# Other tests' processes may launch through the same file meanwhile: the
# uprobes count theirs too, and the join keeps the workload's (its pid is
# in the records).
python3 "$here/join_launches.py" "$tmp/hits.txt" "$tmp/records.txt" --expect-joined 99 | tee "$tmp/join.txt"
grep -q "^join: process [0-9]*: 1200 uprobe hits on 3 threads" "$tmp/join.txt" || { echo "expected 1200 hits"; exit 1; }

# Copies: 50 through the runtime (cudaMemcpy, its driver call cuMemcpy
# inside), whose records carry the driver call's ID, on one thread (the
# driver's records alone are on, as in the launch route).
symbols=$(cd "$here" && python3 -c 'from copy_correlation import SYMBOLS; print(",".join(s for s, _ in SYMBOLS))')
rm -f "$tmp/ready"
"$uprobes" --lib "$sim/libcuda.so.1" --symbols "$symbols" --out "$tmp/copy-hits.txt" --ready "$tmp/ready" \
  > "$tmp/uprobes.txt" 2> "$tmp/uprobes.err" &
pid=$!
for _ in $(seq 100); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
[ -e "$tmp/ready" ] || { echo "launch_uprobes did not attach:"; cat "$tmp/uprobes.err"; exit 1; }
CUDA_INJECTION64_PATH=$records_so API_RECORDS=copies API_RECORDS_OUT=$tmp/copies.txt PYTHONPATH=$sim \
  python3 -c '
import sim_torch
for _ in range(50):
    sim_torch.memcpy_htod(1 << 20)
' 2> "$tmp/workload.err" || { cat "$tmp/workload.err"; exit 1; }
kill -INT "$pid"; wait "$pid"; pid=
python3 "$here/copy_correlation.py" "$tmp/copy-hits.txt" "$tmp/copies.txt" | tee "$tmp/copies-join.txt"
grep -q "^copies: 50; by the driver record of the same ID (cbid: n; -1 none): {305: 50};" "$tmp/copies-join.txt" ||
  { echo "expected 50 copies, each with its driver call's ID"; exit 1; }
grep -q "^cuMemcpy (cbid 305): 50 hits, 50 driver records, 50 records with a hit" "$tmp/copies-join.txt" ||
  { echo "expected 50 cuMemcpy hits, each before its record"; exit 1; }
