"""Workload for gpuflame's memory budget: 16 tensors of 1 MiB, each from a
function of its own (so each is a new stack), one every 0.25 s. With a tiny
--max-memory-mb, gpuflame stops keeping new stacks after about a second:
the later tensors must still be counted, under its over-budget frame.
Uses the simulated CUDA runtime (test fixture)."""
import time

import sim_torch

MiB = 1 << 20
N = 16

functions = []
for i in range(N):
    scope = {}
    exec(f"def alloc_{i}(empty):\n    return empty({MiB})\n", scope)
    functions.append(scope[f"alloc_{i}"])

kept = []
for f in functions:
    kept.append(f(sim_torch.empty))
    time.sleep(0.25)
