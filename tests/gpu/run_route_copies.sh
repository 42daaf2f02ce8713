#!/usr/bin/env bash
# Copies' and memsets' stacks by the launch route on a real GPU: `gpuflame
# record` of tests/gpu/copy_workload.py (pinned and pageable host-to-device
# copies, device-to-host, device-to-device, .item()), once with launch
# stacks from CUPTI's callbacks and once by the route (--launch-stacks
# uprobes). Prints, for each, the route's counts and the copies' time by
# their stack's last frames: by the route, every copy should sit under the
# runtime call that made it (cudaMemcpyAsync, ...), as by the callbacks, and
# none under "[launch stack not sampled]".
# With the bundle from scripts/gpu-bundle.sh in .carry/; output under $OUT.
#   ROUNDS (200)
GF_OUT_SUFFIX=/route-copies . "$(dirname "$0")/common.sh"
for mode in callbacks uprobes; do
  echo "== launch stacks by $mode"
  timeout 120 "$bundle/gpuflame" record -q --launch-stacks "$mode" -o "$out/$mode" -- \
      "$py" "$here/copy_workload.py" "${ROUNDS:-200}" > "$out/$mode.out" 2> "$out/$mode.err" || {
    echo "record failed:"; tail -5 "$out/$mode.err"; status=1; continue; }
  tail -2 "$out/$mode.out"
  python3 - "$out/$mode" <<'PY'
import collections, json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
print("launch_route:", json.dumps(s["gpu_kernels"].get("launch_route")))
print("BPF programs on launches:", {k: v for k, v in s["self_cost"]["programs"].items() if "launch" in k and v["hits"]})
by_tail, copies = collections.Counter(), 0
for line in open(f"{d}/gpu_kernel.time.folded"):
    stack, v = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    if not frames[-1].startswith(("[memcpy", "[memset")):
        continue
    copies += int(v)
    by_tail[";".join(frames[-2:]) if frames[0] != "[launch stack not sampled]" else frames[0] + ";" + frames[-1]] += int(v)
print(f"copies and memsets: {copies / 1e6:.3f} ms in all")
for k, v in by_tail.most_common(10):
    print(f"  {v / 1e6:9.3f} ms  {100 * v / copies:5.1f}%  ...;{k}")
PY
done
exit $status
