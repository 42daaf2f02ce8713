#!/usr/bin/env bash
# What a timeline's CUDA call spans cost and hold, on a real GPU (the H200
# `device` machine), with the bundle from scripts/gpu-bundle.sh in .carry/:
#  1. the overhead harness (bench/overhead_harness.cc) on the launch-bound
#     GPT in one workload process: none, record's exact mode
#     (inprocess-exact), the same with every launch, copy, memset and memory
#     call sent as a span (inprocess-spans: record --timeline's mode) and a
#     placebo; the harness prints the added nanoseconds per call;
#  2. `record --timeline` of memory_calls_workload.py: the device memory
#     calls' spans (count, duration, bytes and stack from their eBPF event),
#     and the copies' bytes on their calls.
#   ROUNDS (8), ITERS (100); SKIP_HARNESS, SKIP_RECORD.
GF_OUT_SUFFIX=/api-spans . "$(dirname "$0")/common.sh"
if [ -z "${SKIP_HARNESS:-}" ]; then
  echo "== launch-bound GPT: a call's cost with spans"
  "$bundle/gpuflame_overhead" --python "$py" --workload "$root/bench/step_workload.py" --kernel-time \
      --injection "$bundle/libgpuflame_cupti.so" --modes none,inprocess-exact,inprocess-spans,placebo \
      --rounds "${ROUNDS:-8}" --iters "${ITERS:-100}" || status=1
fi
if [ -z "${SKIP_RECORD:-}" ]; then
  echo "== record --timeline: device memory calls as spans"
  "$bundle/gpuflame" record -q --timeline -o "$out/memory" -- $py "$here/memory_calls_workload.py" \
      >"$out/memory.stdout" 2>"$out/memory.stderr" || { status=1; tail -5 "$out/memory.stderr"; }
  python3 - "$out/memory" <<'PY'
import collections, gzip, json, statistics, sys
d = sys.argv[1]
doc = json.load(gzip.open(d + "/timeline.json.gz"))
calls = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cuda"]
memory = [e for e in calls if e["name"].split(" ")[0].split(":")[0] in
          ("cudaMalloc", "cudaFree", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemCreate", "cuMemRelease", "cuMemMap",
           "cuMemUnmap", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost", "cuMemAddressReserve", "cuMemAddressFree",
           "cudaMallocAsync", "cudaFreeAsync")]
by = collections.defaultdict(list)
for e in memory:
    by[e["name"].split(" ")[0]].append(e)
for name, es in sorted(by.items()):
    durs = sorted(e["dur"] for e in es)
    joined = sum(1 for e in es if "bytes" in e["args"])
    failed = sum(1 for e in es if e["args"].get("result", 0) != 0)
    print(f"{name}: {len(es)} spans, {joined} with their allocation's bytes, {failed} failed; "
          f"duration p50 {statistics.median(durs):.1f} us, max {durs[-1]:.1f} us")
for e in memory[:3] + memory[-3:]:
    print(json.dumps({k: e[k] for k in ("name", "dur")}), e["args"].get("bytes"), e["args"]["stack"][-160:])
copies = [e for e in calls if "memcpy" in e["name"] or "memset" in e["name"]]
print(f"copy/memset calls: {len(copies)}, with bytes: {sum(1 for e in copies if 'bytes' in e['args'])}")
for e in copies[:2]:
    print(e["name"], e["args"].get("bytes"))
md = doc["metadata"]
print("metadata:", json.dumps({k: md.get(k) for k in ("memory_calls_joined", "kept", "flows", "gpu_records_without_launch",
                                                       "api_calls_dropped_in_process")}))
instants = collections.Counter(e["name"] for e in doc["traceEvents"] if e.get("ph") == "i" and e.get("cat") == "memory")
print("memory instants left:", dict(instants))
PY
fi
exit $status
