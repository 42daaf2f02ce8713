"""Workload: allocator traffic for as long as gpuflame needs to climb its
overhead ladder to the first thrift rung (about 11 s in: native stacks at
its first reading, one step per 10 s). Trainer > step makes and frees 64 KiB
activations on the simulated allocator (a test fixture) for THRIFT_SECONDS
(default 18), pausing a little between steps; two 8 MiB weights stay
allocated to the end. Prints how many activations it made.

With a file's path as its argument it then waits (at most 60 s) for that
file to appear and runs Evaluator > evaluate: ten 128 KiB buffers kept to the
end, which a gpuflame attached by then without a budget (the first gone, and
its thrift with it) sees exactly."""
import os
import sys
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


class Evaluator:
    def evaluate(self):
        return [sim_torch.empty(128 << 10) for _ in range(10)]


if len(sys.argv) > 1:
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # a tick of the library's flusher: it has heard the newcomer
    kept = Evaluator().evaluate()
    print("evaluated", flush=True)
time.sleep(0.3)
