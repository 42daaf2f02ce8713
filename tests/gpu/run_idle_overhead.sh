#!/usr/bin/env bash
# What `gpuflame record` costs the three cases of idle_workload.py on a real
# GPU: each case run plain and under record, ROUNDS (3) rounds in
# alternating order, the workload's own loop time compared (record's start-up
# and its last seconds are outside the loop). Prints each round's ratio and
# their median and range per case. Keeps the last round's record of each
# case (outputs.tgz) for its report and page. With the bundle from
# scripts/gpu-bundle.sh in .carry/; output under $OUT.
GF_OUT_SUFFIX=/idle-overhead . "$(dirname "$0")/common.sh"
declare -A steps=([starved]=${STARVED_STEPS:-60} [tiny]=${TINY_STEPS:-600} [matmul]=${MATMUL_STEPS:-100})
rounds=${ROUNDS:-3}
loop_s() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["loop_s"])'; }
for r in $(seq 1 "$rounds"); do
  for mode in starved tiny matmul; do
    plain() { timeout 240 $py "$here/idle_workload.py" $mode ${steps[$mode]} | loop_s; }
    recorded() {
      rm -rf "$out/$mode"
      timeout 240 "$bundle/gpuflame" record --no-progress -o "$out/$mode" -- $py "$here/idle_workload.py" $mode \
          ${steps[$mode]} 2>"$out/$mode.stderr" | loop_s
    }
    if [ $((r % 2)) -eq 1 ]; then p=$(plain); g=$(recorded); else g=$(recorded); p=$(plain); fi
    echo "$mode $r $p $g" | tee -a "$out/rounds.txt"
  done
done
python3 - "$out/rounds.txt" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    mode, _, plain, rec = line.split()
    by.setdefault(mode, []).append(float(rec) / float(plain))
for mode, r in by.items():
    print(f"{mode}: record / plain loop time, median x{statistics.median(r):.3f} "
          f"(range x{min(r):.3f} to x{max(r):.3f}, {len(r)} rounds)")
PY
for mode in starved tiny matmul; do
  echo "== $mode: the last record's report"
  grep -A7 "^gpuflame: NVML GPU \|^gpuflame: GPU " "$out/$mode.stderr" | head -12
  python3 -c "import json; u=json.load(open('$out/$mode/summary.json'))['utilization']; print('cost', json.dumps(u.get('devices_cost')))"
done
tar -C "$out" -czf "$out/outputs.tgz" starved tiny matmul 2>/dev/null
exit $status
