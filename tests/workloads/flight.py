"""Workload for the agent's flight recorder: a training loop on the
simulated CUDA runtime (test fixture) that runs until asked to stop, so that
a trace of its last seconds can be asked for while it runs. Each step of
Trainer > step: a 2 MiB cudaMalloc, ~50 ms of CPU, its cudaFree; then
~20 ms asleep. Writes argv[1] once its first step is done; stops when
argv[1] + ".stop" exists, or after 30 s (exit 9), so a failing test never
hangs."""
import os
import sys
import time

import sim_torch

MiB = 1 << 20


def spin(seconds):
    deadline = time.process_time() + seconds
    while time.process_time() < deadline:
        pass


class Trainer:
    def step(self):
        buffer = sim_torch.cuda_malloc(2 * MiB)
        spin(0.05)
        sim_torch.cuda_free(buffer)


trainer = Trainer()
ready = sys.argv[1]
deadline = time.time() + 30
while not os.path.exists(ready + ".stop"):
    if time.time() > deadline:
        sys.exit(9)
    trainer.step()
    if not os.path.exists(ready):
        with open(ready, "w") as f:
            f.write("ready")
    time.sleep(0.02)
