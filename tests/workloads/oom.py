"""Workload for tests/e2e out-of-memory forensics, on the simulated CUDA
runtime (test fixture) with a small device: the tests set
GF_SIM_GPU_MEMORY_BYTES to 43 MiB, the 3 MiB context and 40 MiB.

What it holds when its allocation fails (each tensor in its own segment):
  load_weights   16 MiB tensor, live
  warm_up        20 MiB segment, its tensor freed: cached by the allocator
so the device holds 3 + 36 MiB, the tensors 16 MiB, 20 MiB cached and unused.

Then Trainer > step asks for more (argv[1]):
  rescue  22 MiB: fails (3 + 36 + 22 > 43); the allocator frees its cached
          segment and the retry fits (3 + 16 + 22 = 41)
  raise   30 MiB: fails, the cache is freed, fails again (3 + 16 + 30 = 49):
          PyTorch's report, then OutOfMemoryError, caught here; goes on
  exit    as raise, then os._exit(3) at once: no interpreter shutdown, no
          flush at exit

With a second argument "expandable", the allocator runs as PyTorch's with
expandable_segments:True: each segment is physical memory from cuMemCreate
mapped into reserved address space, and cuMemCreate is the call that fails.

It prints the allocator's own figures (memory_allocated, memory_reserved,
num_ooms) for the test to compare with what gpuflame captured.
"""
import os
import sys

import sim_torch

MiB = 1 << 20


def load_weights():
    return sim_torch.empty(16 * MiB)


def warm_up():
    scratch = sim_torch.empty(20 * MiB)
    del scratch  # cached: its segment stays reserved


class Trainer:
    def __init__(self, weights):
        self.weights = weights
        self.activations = None

    def step(self, nbytes):
        self.activations = sim_torch.empty(nbytes)


def main(mode):
    trainer = Trainer(load_weights())
    warm_up()
    nbytes = {"rescue": 22 * MiB, "raise": 30 * MiB, "exit": 30 * MiB}[mode]
    try:
        trainer.step(nbytes)
        outcome = "allocated"
    except sim_torch.OutOfMemoryError:
        outcome = "caught OutOfMemoryError"
    print(f"oom.py {mode}: {outcome}; memory_allocated {sim_torch.memory_allocated()} "
          f"memory_reserved {sim_torch.memory_reserved()} num_ooms {sim_torch.num_ooms()}", flush=True)
    if mode == "exit":
        os._exit(3)


if sys.argv[2:] == ["expandable"]:
    sim_torch.set_expandable_segments(True)
main(sys.argv[1])
