"""Workload for leaks and growth: over about 2.5 s, Cache > leak keeps a
2 MiB tensor every 100 ms in a list it never empties (50 MiB in all),
Trainer > step allocates a 4 MiB scratch tensor and frees it on return, and
Model > load takes 8 MiB once, at the sixth step, and keeps it. Only the
leak grows in most intervals. Uses the simulated CUDA runtime (test
fixture): blocks and segments are exactly the sizes asked for here, and a
freed block is cached for a request of its size only.

With the argument "teardown", it then waits 1 s (several of record's
intervals) and frees the leak before it exits: the list emptied, the
allocator's cache released (empty_cache), as a script that cleans up does.
"""
import sys
import time

import sim_torch

MiB = 1 << 20


class Cache:
    def __init__(self):
        self.kept = []

    def leak(self):
        self.kept.append(sim_torch.empty(2 * MiB))


class Trainer:
    def step(self):
        scratch = sim_torch.empty(4 * MiB)
        return scratch.nbytes  # freed on return


class Model:
    def load(self):
        self.weights = sim_torch.empty(8 * MiB)


cache = Cache()
trainer = Trainer()
model = Model()
for i in range(25):
    cache.leak()
    trainer.step()
    if i == 5:
        model.load()
    time.sleep(0.1)
if sys.argv[1:] == ["teardown"]:
    time.sleep(1.0)
    cache.kept.clear()
    sim_torch.empty_cache()
