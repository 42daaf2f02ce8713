"""Workload: workers forked without exec that allocate at once, as
multiprocessing's fork start method makes them (test fixture: the simulated
CUDA runtime, not a GPU).

The parent holds 8 MiB of tensors and 2 MiB from cudaMalloc, then forks
WORKERS children. Each child, in its first Python statements after fork(),
allocates 3 MiB with cudaMalloc and a 1 MiB tensor under `Worker > run`,
and exits normally (its library flushes at exit). The parent waits for all.

argv: WORKERS."""
import os
import sys

import sim_torch

MiB = 1 << 20


class Worker:
    def run(self):
        self.device = sim_torch.cuda_malloc(3 * MiB)
        self.tensor = sim_torch.empty(1 * MiB)


def load():
    return sim_torch.empty(8 * MiB), sim_torch.cuda_malloc(2 * MiB)


weights = load()
children = []
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        Worker().run()
        sys.exit(0)
    children.append(pid)
failed = 0
for pid in children:
    _, status = os.waitpid(pid, 0)
    failed += status != 0
sys.exit(1 if failed else 0)
