#!/usr/bin/env bash
# Before the launch route takes copies' and memsets' stacks by uprobe (as it
# does launches'): which calls' correlation IDs do copy and memset activity
# records carry (the driver call's, the runtime call's), and do PyTorch's
# copies pass through libcuda's exported copy entry points? One process of
# tests/gpu/copy_workload.py under tests/gpu/api_records.c (API_RECORDS=copies)
# with bench/launch_uprobes.cc recording hits on 16 copy entry points;
# tests/gpu/copy_correlation.py says the rest.
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   ROUNDS (200)
GF_OUT_SUFFIX=/copy-correlation . "$(dirname "$0")/common.sh"
libcuda=$(env -u LD_LIBRARY_PATH "$py" -c 'import ctypes, os; ctypes.CDLL("libcuda.so.1")
print(os.path.realpath(next(l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l)))')
symbols=$(python3 -c "import sys; sys.path.insert(0, '$here'); from copy_correlation import SYMBOLS
print(','.join(s for s, _ in SYMBOLS))")
rm -f "$out/ready"
"$bundle/bench/gpuflame_launch_uprobes" --lib "$libcuda" --ready "$out/ready" --out "$out/hits.txt" \
    --symbols "$symbols" > "$out/uprobes.txt" 2> "$out/uprobes.err" &
uprobes=$!
trap 'kill $uprobes 2>/dev/null' EXIT
for _ in $(seq 100); do [ -e "$out/ready" ] && break; sleep 0.1; done
[ -e "$out/ready" ] || { echo "launch_uprobes did not attach:"; cat "$out/uprobes.err"; exit 1; }
cat "$out/uprobes.err"
CUDA_INJECTION64_PATH="$bundle/libapi_records.so" API_RECORDS=copies API_RECORDS_OUT="$out/records.txt" \
    timeout 120 "$py" "$here/copy_workload.py" "${ROUNDS:-200}" 2>&1 | tail -3
kill -INT $uprobes; wait $uprobes
cat "$out/uprobes.txt"
python3 "$here/copy_correlation.py" "$out/hits.txt" "$out/records.txt"
