"""Workload: for tensor sampling by bytes on the simulated allocator (a test
fixture). Ten 8 MiB weights that stay allocated, then 20000 activations of
64 KiB (1.25 GiB in all) from Trainer > step, each freed at once; last,
sixteen 4 KiB buffers kept to the end, most of them not taken when sampled
(what the allocator holds must still be known: the library's flusher sends
it within 100 ms, so the process holds them a while before it exits).
Prints memory_allocated()."""
import time

import sim_torch


class Loader:
    def load_weights(self):
        return [sim_torch.empty(8 << 20) for _ in range(10)]


class Trainer:
    def step(self):
        for _ in range(100):
            activation = sim_torch.empty(64 << 10)
            del activation

    def keep_buffers(self):
        return [sim_torch.empty(4 << 10) for _ in range(16)]


weights = Loader().load_weights()
trainer = Trainer()
for _ in range(200):
    trainer.step()
buffers = trainer.keep_buffers()
print("memory_allocated", sim_torch.memory_allocated(), flush=True)
time.sleep(0.3)
