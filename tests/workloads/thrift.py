"""Workload: allocator traffic for as long as gpuflame needs to climb its
overhead ladder to the first thrift rung (about 11 s in: native stacks at
its first reading, one step per 10 s). Trainer > step makes and frees 64 KiB
activations on the simulated allocator (a test fixture) for THRIFT_SECONDS
(default 18), pausing a little between steps; two 8 MiB weights stay
allocated to the end. Prints how many activations it made.

With three files' paths as its arguments (READY STOP GO) it writes READY
once its weights are allocated (the library loaded, its hook in), trains
until STOP appears instead (at most 90 s), then waits (at most 60 s) for GO
and runs Evaluator > evaluate: ten 128 KiB buffers kept to the end, which a
gpuflame attached by then without a budget (the first gone, and its thrift
with it) sees exactly."""
import os
import sys
import time

import sim_torch


def wait_for(path, seconds):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


class Trainer:
    def step(self):
        for _ in range(50):
            activation = sim_torch.empty(64 << 10)
            del activation


class Evaluator:
    def evaluate(self):
        return [sim_torch.empty(128 << 10) for _ in range(10)]


ready, stop, go = sys.argv[1:4] if len(sys.argv) > 3 else (None, None, None)
weights = [sim_torch.empty(8 << 20) for _ in range(2)]
if ready:
    open(ready, "w").close()
trainer = Trainer()
steps = 0
deadline = time.monotonic() + (90 if stop else float(os.environ.get("THRIFT_SECONDS", "18")))
while time.monotonic() < deadline and not (stop and os.path.exists(stop)):
    trainer.step()
    steps += 1
    time.sleep(0.002)
print("activations", steps * 50, flush=True)
if go:
    wait_for(go, 60)
    time.sleep(0.3)  # a tick of the library's flusher: it has heard the newcomer
    kept = Evaluator().evaluate()
    print("evaluated", flush=True)
time.sleep(0.3)
