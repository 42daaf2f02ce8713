"""Workload: class methods allocating through the simulated caching allocator
(test fixture), a direct cudaMalloc, and frees. Expected bytes are asserted
by tests/e2e/record_e2e_test.cc. With argv[1], it then writes that file and
stays (until killed, at most 30 s): a machine-wide profiler reads its frames
from a live process (tests/e2e/capabilities_e2e_test.cc)."""
import sys
import time

import sim_torch

MiB = 1 << 20


class LlamaMLP:
    def __init__(self):
        self.weight = sim_torch.empty(8 * MiB)


class Model:
    def __init__(self):
        self.mlp = LlamaMLP()
        self.scratch = None

    def forward(self):
        tmp = sim_torch.empty(4 * MiB)
        del tmp


def helper_alloc():
    return sim_torch.cuda_malloc(6 * MiB)


model = Model()
model.forward()
p = helper_alloc()
if sys.argv[1:]:
    with open(sys.argv[1], "w") as f:
        f.write("allocated")
    time.sleep(30)
