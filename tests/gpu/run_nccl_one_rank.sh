#!/usr/bin/env bash
# NCCL on the real libnccl of PyTorch's wheel, one rank on the one GPU of
# the H200 `device` machine (two-rank hangs and stragglers need two GPUs):
# nccl_one_rank.py bare and under `record --timeline`, ROUNDS interleaved
# rounds of N calls: the time per all-reduce with and without gpuflame, and
# what record saw (its NCCL summary, the probes' run time per hit, the
# calls' spans in the trace). Then bench/nccl_call_cost.c and
# bench/io_syscall_cost.c on this quiet host, if the bundle carries them.
#   ROUNDS (3), N (2000)
GF_OUT_SUFFIX=/nccl . "$(dirname "$0")/common.sh"
work=$(mktemp -d)
for ((r = 0; r < ${ROUNDS:-3}; r++)); do
  sleep 3  # an exited gpuflame's uprobes go a moment later
  echo "bare $($py "$here/nccl_one_rank.py" "${N:-2000}" 2>/dev/null)"
  "$bundle/gpuflame" record -q --timeline --mark 'Trainer > step' -o "$work/rec" -- \
      $py "$here/nccl_one_rank.py" "${N:-2000}" >"$work/out" 2>"$work/err" || { status=1; tail -5 "$work/err"; }
  echo "record --timeline $(cat "$work/out")"
  python3 - "$work/rec" <<'PY'
import collections, gzip, json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
n = s.get("nccl", {})
p = s["self_cost"]["programs"]
print("  nccl:", json.dumps({k: n.get(k) for k in ("calls", "returns", "returns_without_call", "calls_without_return")}),
      "ops:", json.dumps({k: v.get("calls") for k, v in n.get("operations", {}).items()}) if isinstance(n.get("operations"), dict) else "",
      "bpf ns/hit:", {k: p[k]["ns_per_hit"] for k in p if k.startswith("nccl")})
ev = json.load(gzip.open(d + "/timeline.json.gz"))["traceEvents"]
spans = collections.Counter(e["name"].split(" ")[0] for e in ev if e.get("cat") == "nccl" and e.get("ph") in "XB")
print("  spans:", dict(spans.most_common(6)))
PY
done
if [ -x "$bundle/bench/nccl_call_cost" ]; then
  echo "== bench/nccl_call_cost (simulated libnccl) and bench/io_syscall_cost on this host"
  COST_BIN=$bundle/bench/nccl_call_cost NCCL_LIB=$bundle/bench/libnccl.so.2 \
      bash "$root/bench/nccl_call_cost.sh" "$bundle" 3 50000 2>&1 | tail -8
  COST_BIN=$bundle/bench/io_syscall_cost bash "$root/bench/io_syscall_cost.sh" "$bundle" 3 100000 2>&1 | tail -14
fi
rm -rf "$work"
exit $status
