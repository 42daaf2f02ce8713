"""Workload: allocator traffic for as long as gpuflame needs to climb its
overhead ladder to the first thrift rung (about 11 s in: native stacks at
its first reading, one step per 10 s). Trainer > step makes and frees 64 KiB
activations on the simulated allocator (a test fixture) for THRIFT_SECONDS
(default 18), pausing a little between steps; two 8 MiB weights stay
allocated to the end. Prints how many activations it made."""
import os
import time

import sim_torch


class Trainer:
    def step(self):
        for _ in range(50):
            activation = sim_torch.empty(64 << 10)
            del activation


weights = [sim_torch.empty(8 << 20) for _ in range(2)]
trainer = Trainer()
steps = 0
deadline = time.monotonic() + float(os.environ.get("THRIFT_SECONDS", "18"))
while time.monotonic() < deadline:
    trainer.step()
    steps += 1
    time.sleep(0.002)
print("activations", steps * 50, flush=True)
time.sleep(0.3)
