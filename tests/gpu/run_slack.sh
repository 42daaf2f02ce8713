#!/usr/bin/env bash
# The caching allocator's slack on a real GPU (issue 14 item 4): `gpuflame
# record` of tests/gpu/slack_workload.py, whose segments are each made
# under their own function. Checks, per tensor path: unused_space's sum and
# summary.json's slack against torch.cuda.memory_reserved() -
# memory_allocated(), and unused_space per stack against memory_snapshot()'s
# per-segment total_size - allocated_size (as multisets). In-process the
# block sizes are PyTorch's own (rounded): exact. Through the probes
# (pytorch:malloc carries the requested size) the tensor bytes can only be
# lower by the rounding, the slack higher by as much: checked as bounds.
# Carries a build from scripts/gpu-bundle.sh (.carry/); output under $OUT.
GF_OUT_SUFFIX=/slack . "$(dirname "$0")/common.sh"
for way in inprocess probes; do
  echo "== $way"
  timeout 180 "$bundle/gpuflame" record -q -o "$out/$way" --tensor-events "$way" -- \
      $py "$here/slack_workload.py" --stats "$out/$way-stats.json" > "$out/$way.log" 2>&1 || status=1
  python3 - "$out/$way" "$out/$way-stats.json" "$way" <<'PY' || status=1
import json, sys
out, stats, way = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
exact = way == "inprocess"
per_stack = []
for line in open(f"{out}/gpu_memory.unused_space.folded"):
    stack, v = line.rsplit(" ", 1)
    per_stack.append((int(v), stack))
ours_total = sum(v for v, _ in per_stack)
theirs_total = stats["memory_reserved"] - stats["memory_allocated"]
proc = [p for p in json.load(open(f"{out}/summary.json"))["processes"] if p.get("torch")][0]
slack = proc["slack"]
print("summary slack:", slack)
print(f"torch: reserved {stats['memory_reserved']} allocated {stats['memory_allocated']} -> unused {theirs_total}")
ok = True
def check(what, ours, theirs, bound_ok):
    global ok
    good = ours == theirs if exact else bound_ok
    ok &= good
    print(f"  {what}: gpuflame {ours} ({ours / 2**20:.2f} MiB) vs PyTorch {theirs} ({theirs / 2**20:.2f} MiB): "
          f"{'OK' if good else 'MISMATCH'}{'' if exact else ' (bound)'}")
check("unused_space total", ours_total, theirs_total, ours_total >= theirs_total)
check("slack.unused_bytes", slack["unused_bytes"], theirs_total, slack["unused_bytes"] >= theirs_total)
check("slack.reserved_bytes", slack["reserved_bytes"], stats["memory_reserved"],
      slack["reserved_bytes"] == stats["memory_reserved"])
check("slack.tensor_bytes", slack["tensor_bytes"], stats["memory_allocated"],
      slack["tensor_bytes"] <= stats["memory_allocated"])
check("bytes in no known segment", slack["bytes_in_no_known_segment"], 0, slack["bytes_in_no_known_segment"] == 0)
# Per segment: every segment under its own function, so per stack is per segment.
theirs = sorted(s["total_size"] - s["allocated_size"] for s in stats["segments"] if s["total_size"] > s["allocated_size"])
ours = sorted(v for v, _ in per_stack)
good = ours == theirs if exact else len(ours) == len(theirs) and all(a >= b for a, b in zip(ours, theirs))
ok &= good
print(f"  per segment (total_size - allocated_size): gpuflame {ours} vs memory_snapshot {theirs}: "
      f"{'OK' if good else 'MISMATCH'}")
for v, stack in sorted(per_stack, reverse=True):
    print(f"  {v / 2**20:9.2f} MiB unused  ...{stack[-140:]}")
sys.exit(0 if ok else 1)
PY
done
echo "== status $status"
exit $status
