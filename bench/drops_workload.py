"""Load for bench/agent_drops.sh: one of many processes allocating through
the simulated CUDA runtime (test fixture, not a GPU).

    drops_workload.py RATE SECONDS STACKS LIVE [STOP_FILE]

First LIVE tensors are allocated from LIVE distinct call sites and kept (a
model's weights and buffers: every window then reports them in use, each on
its own stack). Then RATE tensors per second are allocated and freed (two
events each) from STACKS of those call sites, 10-29 frames deep, at a steady
rate whatever gpuflame does (no busy loop: the process sleeps 5 ms between
catch-ups). Stops after SECONDS, or as soon as STOP_FILE exists."""
import os
import sys
import time

import sim_torch

RATE = float(sys.argv[1])
SECONDS = float(sys.argv[2])
STACKS = int(sys.argv[3])
LIVE = int(sys.argv[4])
STOP_FILE = sys.argv[5] if len(sys.argv) > 5 else None

# Distinct code objects: each call site is its own function.
SITES = []
for i in range(max(STACKS, LIVE)):
    ns = {"sim_torch": sim_torch}
    exec(f"def site_{i}(n):\n    return sim_torch.empty(n)\n", ns)
    SITES.append(ns[f"site_{i}"])


def down(depth, site, n):
    if depth == 0:
        return SITES[site](n)
    return down(depth - 1, site, n)


kept = [down(10 + i % 20, i, 4096) for i in range(LIVE)]
start = time.monotonic()
k = 0
while True:
    now = time.monotonic() - start
    if now >= SECONDS or (STOP_FILE and os.path.exists(STOP_FILE)):
        break
    # Catch up to RATE * elapsed: a steady rate, however long each step took.
    while k < RATE * now:
        site = k % STACKS
        x = down(10 + site % 20, site, 4096 + (site % 8) * 512)
        del x
        k += 1
    time.sleep(0.005)
