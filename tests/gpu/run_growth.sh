#!/usr/bin/env bash
# Leaks and growth on a real GPU (issue 14 item 3): `gpuflame record` of
# growth_workload.py, whose Cache > leak keeps 12 MiB every 100 ms beside a
# stack that allocates and frees and one that grows once. summary.json's
# growth must name the leak, and only it, at both levels, with exactly the
# bytes the workload leaked (its own count, each tensor its own segment).
# Carries a build from scripts/gpu-bundle.sh (.carry/); output under $OUT.
GF_OUT_SUFFIX=/growth . "$(dirname "$0")/common.sh"
for way in inprocess probes; do
  echo "== $way"
  timeout 180 "$bundle/gpuflame" record --no-progress -o "$out/$way" --tensor-events "$way" -- \
      $py "$here/growth_workload.py" --stats "$out/$way-stats.json" > "$out/$way.log" 2>&1 || status=1
  grep -A6 "growing" "$out/$way.log"
  python3 - "$out/$way" "$out/$way-stats.json" <<'PY' || status=1
import json, sys
out, stats = sys.argv[1], json.load(open(sys.argv[2]))
growth = json.load(open(f"{out}/summary.json"))["growth"]
print("intervals", growth["intervals"], "of", growth["interval_seconds"], "s; workload:", stats)
ok = True
procs = [p for p in growth["processes"] if p["torch_memory"] or p["gpu_memory"]]
if len(procs) != 1:
    print("MISMATCH: growing stacks in", len(procs), "processes:", json.dumps(growth, indent=1))
    sys.exit(1)
for level in ("torch_memory", "gpu_memory"):
    stacks = procs[0][level]
    for s in stacks:
        print(f"  {level}: +{s['growth_bytes'] / 2**20:.1f} MiB in {s['intervals_grown']}/{s['intervals']} "
              f"({s['first_inuse_bytes']} -> {s['last_inuse_bytes']}) ...{s['stack'][-120:]}")
    leak = [s for s in stacks if "Cache > leak" in s["stack"]]
    others = [s for s in stacks if "Cache > leak" not in s["stack"]]
    good = (len(leak) == 1 and not others and leak[0]["growth_bytes"] == stats["leaked_bytes"]
            and leak[0]["last_inuse_bytes"] == stats["leaked_bytes"] and leak[0]["first_inuse_bytes"] == 0
            and 3 * leak[0]["intervals_grown"] >= 2 * leak[0]["intervals"])
    print(f"{level}: {'OK' if good else 'MISMATCH'} (expected only Cache > leak, +{stats['leaked_bytes']} bytes)")
    ok &= good
sys.exit(0 if ok else 1)
PY
done
echo "== status $status"
exit $status
