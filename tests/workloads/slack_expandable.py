"""Workload for unused_space under expandable segments (cuMemCreate chunks
mapped with cuMemMap), on the simulated CUDA runtime (test fixture), whose
expandable segments map one chunk of the 2 MiB-rounded block size each:
Cache > grow's 5 MiB block lies in a 6 MiB chunk (1 MiB idle); Spill > run's
3 MiB block, freed on return, leaves its 4 MiB chunk mapped and idle."""
import sim_torch

MiB = 1 << 20
sim_torch.set_expandable_segments(True)


class Cache:
    def grow(self):
        self.block = sim_torch.empty(5 * MiB)


class Spill:
    def run(self):
        t = sim_torch.empty(3 * MiB)
        return t.nbytes


c = Cache()
c.grow()
Spill().run()
