"""Workload: the probes' tensor sampling, the guardrails' third CPU rung (a
test fixture on the simulated allocator). Ten 8 MiB weights that stay
allocated, then activations of 64 KiB from Trainer > step, each freed at
once, and every 500th step an 8 MiB snapshot from Trainer > snapshot, freed
at once too, for argv[2] seconds. Writes the number of steps and snapshots
to argv[1] as it ends: the truth the recording's estimates are held to."""
import sys
import time

import sim_torch


class Loader:
    def load_weights(self):
        return [sim_torch.empty(8 << 20) for _ in range(10)]


class Trainer:
    def step(self):
        activation = sim_torch.empty(64 << 10)
        del activation

    def snapshot(self):
        buffer = sim_torch.empty(8 << 20)
        del buffer


weights = Loader().load_weights()
trainer = Trainer()
steps = snapshots = 0
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    trainer.step()
    steps += 1
    if steps % 500 == 0:
        trainer.snapshot()
        snapshots += 1
with open(sys.argv[1], "w") as f:
    f.write(f"{steps} {snapshots}\n")
