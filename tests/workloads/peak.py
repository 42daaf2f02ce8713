"""Workload for the peak views: memory rises to a peak mid-run under
Trainer > step (activations freed on return), then falls; what is left at
the end is not what was live at the peak. Uses the simulated CUDA runtime
(test fixture): blocks and segments are exactly the sizes asked for here."""
import sim_torch

MiB = 1 << 20


class Model:
    def load(self):
        self.weights = sim_torch.empty(64 * MiB)


class Trainer:
    def step(self):
        activations = []
        for _ in range(8):
            activations.append(sim_torch.empty(32 * MiB))
        return len(activations)  # 64 + 256 MiB live here: the peak

    def keep(self):
        self.kept = sim_torch.empty(16 * MiB)


model = Model()
model.load()
trainer = Trainer()
trainer.step()
sim_torch.empty_cache()  # the device level falls too
trainer.keep()
