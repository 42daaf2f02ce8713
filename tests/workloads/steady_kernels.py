"""Workload: a steady stream of kernel launches on the simulated CUDA runtime
and CUPTI (test fixture), for duty-cycled activity: a gemm (300 us on the
simulated GPU) and a 1 MiB activation from Trainer > step every millisecond,
for argv[1] seconds.
With argv[2] (a file name) it first writes its pid there and waits for
argv[3] to appear, so that a profiler can attach; with argv[4], it runs
until that file appears too (the profiler has left), then argv[1] seconds
more."""
import os
import sys
import time

import sim_torch

GEMM = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"


class Trainer:
    def step(self):
        activation = sim_torch.empty(1 << 20)
        sim_torch.launch(GEMM, 300)
        del activation


seconds = float(sys.argv[1])
if len(sys.argv) > 3:
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    deadline = time.time() + 60
    while not os.path.exists(sys.argv[3]) and time.time() < deadline:
        time.sleep(0.01)
t = Trainer()


def run_until(done):
    while not done():
        t.step()
        time.sleep(0.001)


if len(sys.argv) > 4:
    deadline = time.monotonic() + 60
    run_until(lambda: os.path.exists(sys.argv[4]) or time.monotonic() > deadline)
end = time.monotonic() + seconds
run_until(lambda: time.monotonic() > end)
