"""Workload for `gpuflame record --pid`: holds 6 MiB of tensors, writes its
pid to argv[1], waits for the file argv[2] to appear (gpuflame is attached
by then), allocates, writes what the simulated driver holds for it to
argv[1] + ".held", then sleeps until killed, or with argv[3] "exit" exits
at once (the interpreter's teardown frees every tensor). With argv[3]
"sampled" it holds 64 MiB from before gpuflame attached, and after it also
16 blocks of 2 MiB, which sampling by bytes (4 MiB) takes about half of,
then 4 MiB, always taken: its record carries the allocator's totals with
every block in them.
Uses the simulated CUDA runtime (test fixture)."""
import os
import sys
import time

import sim_torch

MiB = 1 << 20


def hold():
    return sim_torch.empty(10 * MiB)


SAMPLED = sys.argv[3:] == ["sampled"]


def before_attach():
    return sim_torch.empty((64 if SAMPLED else 6) * MiB)


def small_blocks():
    if not SAMPLED:
        return []
    return [sim_torch.empty(2 * MiB) for _ in range(16)] + [sim_torch.empty(4 * MiB)]


early = before_attach()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
deadline = time.time() + 60
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.01)
kept = hold()
blocks = small_blocks()
# What the driver says it holds now (argv[1] + ".held"): device-level in
# use, what it held before gpuflame attached included, must add up to it.
with open(sys.argv[1] + ".held.tmp", "w") as f:
    f.write(str(sim_torch.held_bytes()))
os.rename(sys.argv[1] + ".held.tmp", sys.argv[1] + ".held")
if sys.argv[3:] != ["exit"]:
    time.sleep(60)
