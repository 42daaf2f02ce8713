#!/usr/bin/env bash
# Memory a process held before gpuflame attached, on a real GPU (issue 13
# item 5): a PyTorch process allocates, then `gpuflame record -p` attaches;
# gpu_memory's in use must equal what the driver (NVML, via nvidia-smi) says
# the process holds, the part from before under
# "[held before gpuflame attached, per the driver ...]", and torch_memory's
# "[allocated before gpuflame attached]" must equal memory_allocated().
# With the bundle from scripts/gpu-bundle.sh in .carry/. Every command bounded.
GF_OUT_SUFFIX=/before-attach . "$(dirname "$0")/common.sh"
cat > "$out/holder.py" <<'PY'
import os, sys, time, json, torch
x = [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]  # 1 GiB in 4 blocks
torch.cuda.synchronize()
open(sys.argv[1] + ".tmp", "w").write(str(os.getpid())); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
deadline = time.time() + 60
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.05)
y = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")  # after attach: seen allocated
torch.cuda.synchronize()
json.dump({"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()},
          open(sys.argv[3], "w"))
time.sleep(2)
PY
rm -f "$out/pid" "$out/go"
timeout 90 $py "$out/holder.py" "$out/pid" "$out/go" "$out/torch.json" > "$out/holder.log" 2>&1 &
for _ in $(seq 300); do [ -f "$out/pid" ] && break; sleep 0.1; done
pid=$(cat "$out/pid")
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$out/smi_before.csv"
(sleep 2; touch "$out/go") &
timeout 40 "$bundle/gpuflame" record -q -d 4 -o "$out/rec" -p "$pid" > "$out/rec.log" 2>&1 || status=1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$out/smi_after.csv"
wait
python3 - "$out" "$pid" <<'PY' || status=1
import gzip, json, subprocess, sys
out, pid = sys.argv[1], sys.argv[2]
def smi(name):
    for line in open(f"{out}/{name}"):
        p, mib = [s.strip() for s in line.split(",")]
        if p == pid:
            return int(mib) << 20
print("nvidia-smi used_memory before/after attach (MiB):", smi("smi_before.csv") >> 20, smi("smi_after.csv") >> 20)
torch = json.load(open(f"{out}/torch.json"))
print("torch at the end:", {k: v >> 20 for k, v in torch.items()}, "MiB")
summary = json.load(open(f"{out}/rec/summary.json"))
print("warnings:", summary["warnings"])
for name in ("gpu_memory", "torch_memory"):
    folded = f"{out}/rec/{name}.inuse_space.folded"
    total, before = 0, {}
    try:
        for line in open(folded):
            stack, value = line.rsplit(" ", 1)
            total += int(value)
            if "before gpuflame attached" in stack:
                before[stack.split(";")[-1]] = int(value)
    except FileNotFoundError:
        print(name, "no", folded)
        continue
    print(f"{name} in use {total >> 20} MiB ({total}); before attach: " +
          ", ".join(f"{k}: {v >> 20} MiB ({v})" for k, v in before.items()))
PY
ls "$out/rec" | head -30
exit $status
