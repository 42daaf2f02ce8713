"""Workload: the probes' sampled tensor events with a start-up exempted (a
test fixture on the simulated allocator). The start-up counts from the
process's first tensor: ten 8 MiB weights and 200 buffers of 64 KiB from
Warmup > fill, all kept. Once argv[2] seconds and a half have passed since
just before that first tensor, it frees half the buffers (allocated in the
start-up, freed after it) and, on a thread started then, churns 64 KiB
activations from Trainer > step, each freed at once, for argv[3] seconds.
Writes the number of steps to argv[1] as it ends: the truth the
recording's estimate is held to."""
import sys
import threading
import time

import sim_torch


class Loader:
    def load_weights(self):
        return [sim_torch.empty(8 << 20) for _ in range(10)]


class Warmup:
    def fill(self):
        return [sim_torch.empty(64 << 10) for _ in range(200)]


class Trainer:
    def step(self):
        activation = sim_torch.empty(64 << 10)
        del activation


first_tensor = time.monotonic()  # gpuflame's clock starts at the next line, or after
weights = Loader().load_weights()
buffers = Warmup().fill()
took = time.monotonic() - first_tensor
if took >= float(sys.argv[2]):
    sys.exit(f"the start-up took {took:.1f} s, past the {sys.argv[2]} s exempted")
time.sleep(max(0.0, first_tensor + float(sys.argv[2]) + 0.5 - time.monotonic()))
del buffers[100:]
steps = 0


def train():
    global steps
    trainer = Trainer()
    end = time.monotonic() + float(sys.argv[3])
    while time.monotonic() < end:
        trainer.step()
        steps += 1


worker = threading.Thread(target=train)
worker.start()
worker.join()
with open(sys.argv[1], "w") as f:
    f.write(f"{steps}\n")
