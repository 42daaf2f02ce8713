#!/usr/bin/env bash
# Two checks on a real GPU (the H200 `device` machine), with the bundle from
# scripts/gpu-bundle.sh in .carry/; output under $OUT:
#  1. the UUID join of a lane to NVML's GPU (issue 16): `record` of
#     idle_workload.py's matmul case, whose lane must say `uuid` equal to
#     nvidia-smi's and `nvml.by: "uuid"`; then the agent's /metrics for the
#     same case, whose lane series must carry gpu="0" and that uuid, and no
#     gpuflame_gpu_lane_device_not_joined_total{reason="uuid_unlisted"};
#  2. how long record's uprobes outlive it (issue 11): bench/probe_teardown.sh
#     (uprobe_multi links against perf events), then NCCL's per-call cost with
#     each (bench/nccl_call_cost.sh), on the simulated libnccl.so.2 carried
#     prebuilt (the host has no compiler). ROUNDS: 3; SKIP_TEARDOWN=1 runs
#     the first check alone.
GF_OUT_SUFFIX=/uuid-teardown . "$(dirname "$0")/common.sh"
echo "== nvidia-smi -L"
nvidia-smi -L || status=1
echo "== record: the lane's UUID"
CASES=matmul MATMUL_STEPS=${MATMUL_STEPS:-200} bash "$here/run_idle.sh" >"$out/idle.txt" 2>&1 || status=1
grep -E "steady nvml|^device|GPU 0 of pid|NVML GPU" "$out/idle.txt" | cut -c1-400
python3 - "${OUT:-/tmp/gpuflame-gpu}/idle/matmul/summary.json" <<'PY' || status=1
import json, sys
for g in json.load(open(sys.argv[1]))["utilization"]["gpus"]:
    print("lane", g["gpu"], "uuid", g.get("uuid"), "nvml", {k: v for k, v in g["nvml"].items() if k != "steady"})
PY
echo "== agent: the lane's labels"
CASES=matmul SCRAPES=${SCRAPES:-24} RUN_FOR=${RUN_FOR:-30} bash "$here/run_agent_gpu_metrics.sh" >"$out/agent.txt" 2>&1 || status=1
grep -E "gpu_lane_verdict|not_joined|lane_device_sm" "$out/agent.txt" | head -8
[ -n "${SKIP_TEARDOWN:-}" ] && exit $status
export COST_BIN=$bundle/bench/nccl_call_cost NCCL_LIB=$bundle/bench/libnccl.so.2
echo "== record's uprobes after it returns: uprobe_multi against perf events"
bash "$root/bench/probe_teardown.sh" "$bundle" "${ROUNDS:-3}" || status=1
echo "== NCCL per-call cost, uprobe_multi links"
bash "$root/bench/nccl_call_cost.sh" "$bundle" "${ROUNDS:-3}" 2>&1 | tail -7 || status=1
echo "== NCCL per-call cost, perf-event uprobes"
GPUFLAME_UPROBE_MULTI=0 bash "$root/bench/nccl_call_cost.sh" "$bundle" "${ROUNDS:-3}" 2>&1 | tail -7 || status=1
exit $status
