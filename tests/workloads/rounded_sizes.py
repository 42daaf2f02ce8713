"""Workload: tensors whose sizes the caching allocator rounds up (the
simulated one to 512-byte blocks, as PyTorch's does), all kept:

  Loader > load   1000 B (a 1024 B block), 1 MiB + 1 B (1 MiB + 512 B),
                  3 x 100 B (512 B each)
  cpu_side        4 MiB reported to the profiler hook as a *CPU* allocation,
                  as PyTorch's CPU allocator does while a memory profiler
                  runs: not GPU memory
"""
import sim_torch


class Loader:
    def load(self):
        return [sim_torch.empty(1000), sim_torch.empty((1 << 20) + 1)] + [sim_torch.empty(100) for _ in range(3)]


def cpu_side():
    sim_torch.cpu_alloc_reported(4 << 20)


kept = Loader().load()
cpu_side()
