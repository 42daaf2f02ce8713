#!/usr/bin/env bash
# The peak views on a real GPU (issue 14 item 1): `gpuflame record` of a
# training loop with backward() (tests/gpu/backward_origin.py), whose tensor
# memory peaks during each step; peak_space's sum per level against
# PyTorch's own high-water marks, torch.cuda.memory_stats()'s
# allocated_bytes.all.peak (tensor level) and reserved_bytes.all.peak
# (device level: the driver's segments; gpuflame also sees device memory
# PyTorch did not allocate, so it may be higher there, never lower).
# Carries a build from scripts/gpu-bundle.sh (.carry/); output under $OUT.
GF_OUT_SUFFIX=/peak . "$(dirname "$0")/common.sh"
for way in inprocess probes; do
  echo "== $way"
  timeout 180 "$bundle/gpuflame" record -q -o "$out/$way" --tensor-events "$way" -- \
      $py "$here/backward_origin.py" --steps 20 --stats "$out/$way-stats.json" > "$out/$way.log" 2>&1 || status=1
  python3 - "$out/$way" "$out/$way-stats.json" <<'PY' || status=1
import json, sys
out, stats = sys.argv[1], json.load(open(sys.argv[2]))
def total(name, kind):
    t = 0
    for line in open(f"{out}/{name}.{kind}.folded"):
        t += int(line.rsplit(" ", 1)[1])
    return t
summary = json.load(open(f"{out}/summary.json"))
peaks = [p.get("peak_bytes") for p in summary["processes"] if p.get("torch")]
print("summary peak_bytes:", peaks)
ok = True
for name, key, exact in (("torch_memory", "allocated_bytes.all.peak", True), ("gpu_memory", "reserved_bytes.all.peak", False)):
    ours, theirs = total(name, "peak_space"), stats[key]
    good = ours == theirs if exact else ours >= theirs
    ok &= good
    print(f"{name} peak_space {ours} ({ours / 2**20:.1f} MiB) vs {key} {theirs} ({theirs / 2**20:.1f} MiB): "
          f"{'OK' if good else 'MISMATCH'}; in use at the end {total(name, 'inuse_space') / 2**20:.1f} MiB")
lines = sorted(open(f"{out}/torch_memory.peak_space.folded"), key=lambda l: -int(l.rsplit(" ", 1)[1]))
for l in lines[:4]:
    stack, v = l.rsplit(" ", 1)
    print(f"  {int(v) / 2**20:9.1f} MiB  ...{stack[-150:]}")
sys.exit(0 if ok else 1)
PY
done
echo "== status $status"
exit $status
