#!/usr/bin/env bash
# The probes' path per part (issue 11, item 4), on the H200 `device` machine
# with the bundle from scripts/gpu-bundle.sh in .carry/: the overhead
# harness's stage-N modes stop each allocator event after one part (entry,
# frees whole, header, thread state, innermost frame, data-stack copy, walk,
# stack ID; enum
# gf_bench_stage), so each mode's BPF time per hit, against the next and the
# full path's, is that part's cost; noop is the bare probe (the trap).
# Two workloads: tensors allocated 20 Python frames deep
# (bench/overhead_workload.py), and the launch-bound GPT's training step
# (bench/step_workload.py: PyTorch's own stacks, C boundaries and all).
# gpuflame-nointern is the full path with every stack sent whole, as before
# stacks were interned in the kernel: against gpuflame, what interning saves.
# Environment: ROUNDS (6), ITERS (20000 allocations), STEPS (40 steps),
# MODES (default: all of the above).
. "$(dirname "$0")/common.sh"
modes=${MODES:-none,noop,gpuflame,gpuflame-sampled,gpuflame-sampled-past-startup,gpuflame-nointern,stage-1,stage-2,stage-3,stage-4,stage-5,stage-6,stage-7,stage-8}
echo "== tensors 20 frames deep: $modes"
"$bundle/gpuflame_overhead" --python "$py" --workload "$root/bench/overhead_workload.py" --modes "$modes" \
    --rounds "${ROUNDS:-6}" --iters "${ITERS:-20000}" || status=1
echo "== launch-bound GPT training steps: $modes"
"$bundle/gpuflame_overhead" --python "$py" --workload "$root/bench/step_workload.py" --modes "$modes" \
    --rounds "${ROUNDS:-6}" --iters "${STEPS:-40}" || status=1
exit $status
