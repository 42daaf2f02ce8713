"""Workload: a device allocation from a native thread with no Python stack,
inside a Python process (simulated CUDA runtime: a test fixture)."""
import sim_torch

MiB = 1 << 20


def start_worker():
    return sim_torch.alloc_on_native_thread(5 * MiB)


start_worker()
