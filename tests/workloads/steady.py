"""Workload for `gpuflame record --pid`: holds 6 MiB of tensors, writes its
pid to argv[1], waits for the file argv[2] to appear (gpuflame is attached
by then), allocates, writes what the simulated driver holds for it to
argv[1] + ".held", then sleeps until killed, or with argv[3] "exit" exits
at once (the interpreter's teardown frees every tensor). Uses the simulated
CUDA runtime (test fixture)."""
import os
import sys
import time

import sim_torch

MiB = 1 << 20


def hold():
    return sim_torch.empty(10 * MiB)


def before_attach():
    return sim_torch.empty(6 * MiB)


early = before_attach()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
deadline = time.time() + 60
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.01)
kept = hold()
# What the driver says it holds now (argv[1] + ".held"): device-level in
# use, what it held before gpuflame attached included, must add up to it.
with open(sys.argv[1] + ".held.tmp", "w") as f:
    f.write(str(sim_torch.held_bytes()))
os.rename(sys.argv[1] + ".held.tmp", sys.argv[1] + ".held")
if sys.argv[3:] != ["exit"]:
    time.sleep(60)
