"""Workload for `gpuflame record --pid`: allocates, then waits until killed.
Prints its pid when ready."""
import os
import sys
import time

import sim_torch

MiB = 1 << 20


def hold():
    return sim_torch.empty(10 * MiB)


print(os.getpid(), flush=True)
sys.stdin.readline()  # the test writes a line once gpuflame is attached
kept = hold()
print("allocated", flush=True)
time.sleep(60)
