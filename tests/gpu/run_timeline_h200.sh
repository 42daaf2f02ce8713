#!/usr/bin/env bash
# The timeline on a real GPU (the H200 `device` machine), with the bundle from
# scripts/gpu-bundle.sh in .carry/:
#  1. `record --timeline --mark 'Trainer > step'` of the launch-bound GPT
#     (train_bench.py, STEPS timed steps after its warm-up), and the same
#     steps under torch.profiler in another run: kernels from the first step
#     on, count and total duration, from both Chrome traces;
#     metadata.gpu_clock (the clock pairs' uncertainty and steps), call
#     spans, arrows, drops;
#  2. `record --timeline` of a model load: a 1 GiB weights file written,
#     then read and copied to the GPU (the I/O spans, the copies, the
#     device memory calls);
# leaving at most a few files in $OUT (the device returns few): the two
# gpuflame traces and this script's report.
#   STEPS (20)
GF_OUT_SUFFIX= . "$(dirname "$0")/common.sh"
work=$(mktemp -d)
steps=${STEPS:-20}
echo "== launch-bound GPT, $steps steps: record --timeline, then torch.profiler"
"$bundle/gpuflame" record -q --timeline --mark 'Trainer > step' -o "$work/gpt" -- \
    $py "$here/train_bench.py" --steps "$steps" >"$work/gpt.out" 2>&1 || { status=1; tail -5 "$work/gpt.out"; }
$py "$here/train_bench.py" --steps "$steps" --recorder torch-profiler --profiler-trace "$work/torch.json" \
    >"$work/torch.out" 2>&1 || { status=1; tail -5 "$work/torch.out"; }
cp "$work/gpt/timeline.json.gz" "$out/gpt-timeline.json.gz" 2>/dev/null
python3 - "$work/gpt/timeline.json.gz" "$work/torch.json" <<'PY'
import gzip, json, sys
ours = json.load(gzip.open(sys.argv[1]))
theirs = json.load(open(sys.argv[2]))
ev = ours["traceEvents"]
# gpuflame: GPU kernels (B/E pairs on the GPU tracks) from the first step's phase on.
steps = [e for e in ev if e.get("cat") == "phase" and e.get("name") == "Trainer > step" and e["ph"] == "B"]
t0 = min(e["ts"] for e in steps) if steps else 0
open_ = {}
kernels = []
for e in ev:
    if e.get("cat") != "gpu" or e["name"].startswith("["):
        continue
    key = (e["pid"], e["tid"], e["name"])
    if e["ph"] == "B":
        open_.setdefault(key, []).append(e["ts"])
    elif e["ph"] == "E" and open_.get(key):
        b = open_[key].pop()
        if b >= t0:
            kernels.append(e["ts"] - b)
tk = [e for e in theirs["traceEvents"] if e.get("cat") == "kernel"]
print(f"kernels from the first step on: gpuflame {len(kernels)}, {sum(kernels)/1e3:.2f} ms; "
      f"torch.profiler {len(tk)}, {sum(e['dur'] for e in tk)/1e3:.2f} ms (its warm-up and timed steps)")
md = ours["metadata"]
print("gpu_clock:", json.dumps(md.get("gpu_clock")))
print("kept:", json.dumps(md.get("kept")), "dropped:", json.dumps(md.get("dropped")))
print("flows", md.get("flows"), "gpu_records_without_launch", md.get("gpu_records_without_launch"),
      "api_calls_dropped_in_process", md.get("api_calls_dropped_in_process"),
      "memory_calls_joined", md.get("memory_calls_joined"), "gpu_work_overlapping", md.get("gpu_work_overlapping"),
      "phase_stacks_late", md.get("phase_stacks_late"))
# The timed steps' phases (the last STEPS): how much of each step's period they cover.
b = sorted(e["ts"] for e in ev if e.get("cat") == "phase" and e["ph"] == "B")
ends = sorted(e["ts"] for e in ev if e.get("cat") == "phase" and e["ph"] == "E")
spans = [(x, min((y for y in ends if y > x), default=x)) for x in b]
print("phases (ms, begin and length, the last 8):", [(round(x / 1e3, 2), round((y - x) / 1e3, 2)) for x, y in spans[-8:]])
PY
echo "== model load: a 1 GiB weights file read and copied to the GPU"
cat > "$work/load.py" <<'PY'
import os, sys, torch
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(os.urandom(1 << 20) * 1024)
os.sync()
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("1")


class Loader:
    def read_weights(self):
        with open(path, "rb") as f:
            return f.read()

    def to_gpu(self, blob):
        return torch.frombuffer(bytearray(blob), dtype=torch.uint8).cuda()


loader = Loader()
w = loader.to_gpu(loader.read_weights())
torch.cuda.synchronize()
print("loaded", w.numel())
PY
"$bundle/gpuflame" record -q --timeline --mark 'Loader > read_weights' --mark 'Loader > to_gpu' -o "$work/load" -- \
    $py "$work/load.py" "$work/weights.bin" >"$work/load.out" 2>&1 || { status=1; tail -5 "$work/load.out"; }
cp "$work/load/timeline.json.gz" "$out/load-timeline.json.gz" 2>/dev/null
python3 - "$work/load/timeline.json.gz" <<'PY'
import collections, gzip, json, sys
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
phases = [e for e in ev if e.get("cat") == "phase" and e["ph"] in "BX"]
io = [e for e in ev if e.get("cat") == "io"]
by = collections.Counter(e["name"].split(" ")[0] for e in io)
print("I/O spans:", dict(by), "read bytes:", sum(e["args"].get("bytes", 0) for e in io if e["name"].startswith("read")),
      "read time ms:", round(sum(e["dur"] for e in io if e["name"].startswith("read")) / 1e3, 1))
copies = [e for e in ev if e.get("cat") == "gpu" and "memcpy" in e["name"] and e["ph"] in "BX"]
print("GPU copies:", len(copies), "bytes:", sum(e["args"].get("bytes", 0) for e in copies))
calls = [e for e in ev if e.get("cat") == "cuda"]
print("calls:", collections.Counter(e["name"].split(" ")[0].split(":")[0] for e in calls).most_common(8))
print("phases:", collections.Counter(e["name"] for e in phases))
PY
rm -rf "$work"
exit $status
