"""Workload for tests/e2e: every Python shape the profiler must name, driven
through the simulated CUDA runtime (test fixture). The e2e test asserts the
exact stacks and bytes listed next to each step.

Simulated allocator rules (tests/fixtures/cuda_sim): each new block gets its
own segment, rounded up to 2 MiB; freed blocks are cached by size.
"""
import threading

import sim_torch

MiB = 1 << 20


class GPUModelRunner:
    def __init__(self):
        self.kv_caches = []

    def _allocate_kv_cache_tensors(self, n):
        for _ in range(n):
            self.kv_caches.append(sim_torch.empty(16 * MiB))


# vLLM-like KV-cache preallocation at startup: 4 x 16 MiB (tensor and device)
runner = GPUModelRunner()
runner._allocate_kv_cache_tensors(4)


def outer():
    def inner():
        return sim_torch.empty(2 * MiB)  # "outer > inner": 2 MiB

    return inner()


nested = outer()

make = lambda: sim_torch.empty(4 * MiB)  # noqa: E731  "<lambda>": 4 MiB
from_lambda = make()


def gen_blocks():
    for _ in range(3):
        yield sim_torch.empty(1 * MiB)  # "gen_blocks": 3 x 1 MiB tensors, 3 x 2 MiB segments


blocks = list(gen_blocks())


def recurse(n):
    if n == 0:
        return sim_torch.empty(1 * MiB)  # deeper than the frame limit: "[truncated...]" root
    return recurse(n - 1)


deep = recurse(200)


class Worker:
    def run(self):
        self.buf = sim_torch.empty(8 * MiB)  # "Worker > run" on another thread: 8 MiB


worker = Worker()
thread = threading.Thread(target=worker.run, name="alloc-worker")
thread.start()
thread.join()


def scratch():
    tmp = sim_torch.empty(32 * MiB)  # 32 MiB allocated, freed: tensor in use 0
    del tmp


scratch()
sim_torch.empty_cache()  # cudaFree of the cached 32 MiB segment: device in use 0 too


def driver_workspace():
    return sim_torch.cu_mem_alloc(3 * MiB)  # direct driver call: leaf cuMemAlloc_v2, 3 MiB


workspace = driver_workspace()
