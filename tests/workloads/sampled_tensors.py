"""Workload: for tensor sampling by bytes on the simulated allocator (a test
fixture). Ten 8 MiB weights that stay allocated, then 20000 activations of
64 KiB (1.25 GiB in all) from Trainer > step, each freed at once."""
import sim_torch


class Loader:
    def load_weights(self):
        return [sim_torch.empty(8 << 20) for _ in range(10)]


class Trainer:
    def step(self):
        for _ in range(100):
            activation = sim_torch.empty(64 << 10)
            del activation


weights = Loader().load_weights()
trainer = Trainer()
for _ in range(200):
    trainer.step()
