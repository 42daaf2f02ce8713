#!/usr/bin/env bash
# Prints full mixed (native + Python) stacks of a real PyTorch run, for the
# record (issue 4): device-level allocations from torch_workload.py.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${OUT:-/tmp/gpuflame-gpu}/stacks
mkdir -p "$out"
"$root/.carry/gpuflame" record -q -o "$out" -- python3 "$here/torch_workload.py" >/dev/null
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
s = json.load(open(f"{out}/summary.json"))
print("symbols:", json.dumps(s["symbols"]), "warnings:", s["warnings"])
for line in sorted(open(f"{out}/gpu_memory.alloc_space.folded"), key=lambda l: -int(l.rsplit(" ", 1)[1]))[:3]:
    stack, v = line.rstrip("\n").rsplit(" ", 1)
    print(f"--- {int(v) / 2**20:.1f} MiB")
    for i, f in enumerate(stack.split(";")):
        print(f"  {'  ' * min(i, 30)}{f}")
PY
