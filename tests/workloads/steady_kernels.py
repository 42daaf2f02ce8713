"""Workload: a steady stream of kernel launches on the simulated CUDA runtime
and CUPTI (test fixture), for duty-cycled activity: a gemm (300 us on the
simulated GPU) and a 1 MiB activation from Trainer > step every millisecond,
for argv[1] seconds.
With argv[2] (a file name) it first writes its pid there and waits for
argv[3] to appear, so that a profiler can attach; with argv[4], it runs
until that file appears too (the profiler has left), then argv[1] seconds
more. With STEADY_NCCL_EVERY=N in the environment, every Nth step also
launches a kernel named as NCCL's (no NCCL call around it), as a process
that uses NCCL runs them."""
import os
import sys
import time

import sim_torch

GEMM = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"
NCCL = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"
NCCL_EVERY = int(os.environ.get("STEADY_NCCL_EVERY", "0"))


class Trainer:
    steps = 0

    def step(self):
        activation = sim_torch.empty(1 << 20)
        sim_torch.launch(GEMM, 300)
        self.steps += 1
        if NCCL_EVERY and self.steps % NCCL_EVERY == 0:
            sim_torch.launch(NCCL, 20)
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
