"""Workload: expandable segments (cuMemCreate + cuMemMap), through the
simulated CUDA runtime (test fixture)."""
import sim_torch

MiB = 1 << 20
sim_torch.set_expandable_segments(True)


class Cache:
    def grow(self):
        self.block = sim_torch.empty(6 * MiB)  # one 6 MiB cuMemCreate handle, mapped


c = Cache()
c.grow()
