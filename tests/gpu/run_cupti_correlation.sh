#!/usr/bin/env bash
# Which correlation IDs CUPTI's launch callbacks carry on the real driver,
# and where launches enter it: cupti_toggle.c's correlation mode (no
# gpuflame) under an eager PyTorch step (elementwise kernels, a bf16 matmul
# through cuBLAS, a backward) and one NCCL rank. Settles whether launch
# stacks taken in the driver domain alone (half the callbacks a runtime
# launch costs) would join the kernels' activity records.
. "$(dirname "$0")/common.sh"
export CUDA_INJECTION64_PATH=$bundle/libcupti_toggle.so TOGGLE_WHAT=correlation
echo "== eager step"
$py - <<'PY' 2>&1 | grep -v "^cupti_toggle: switching"
import torch
x = torch.ones(1024, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
w = torch.ones(1024, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
for _ in range(3):
    y = (x @ w).relu().sum()
    y.backward()
torch.cuda.synchronize()
PY
echo "== one NCCL rank, 20 all-reduces"
$py "$here/nccl_one_rank.py" 20 2>&1 | grep -v "^cupti_toggle: switching" | grep "cupti_toggle: [0-9k]\|driver launches"
exit $status
