"""Workload for the timeline (record --timeline): three training steps on
the simulated CUDA runtime and CUPTI (test fixture), each with known phases,
memory and GPU work, so the trace can be checked event by event:
  weights                 a 16 MiB cudaMalloc before the loop, freed after it
  DataLoader > __next__   ~60 ms of CPU, then an 8 MiB host-to-device copy
                          (the simulated GPU: 8 us)
  Trainer > step          a 4 MiB tensor; ~60 ms of CPU; two gemm launches
                          (300 us each on the simulated GPU) and a
                          synchronise (torch.cuda.synchronize()); ~60 ms of
                          CPU; the tensor freed
  between steps           0.5 s asleep: off CPU, so the phases end
"""
import time

import sim_torch

GEMM = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"
MiB = 1 << 20


def spin(seconds):
    deadline = time.process_time() + seconds
    while time.process_time() < deadline:
        pass


class DataLoader:
    def __next__(self):
        spin(0.06)
        sim_torch.memcpy_htod(8 * MiB)
        return 1


class Trainer:
    def step(self, batch):
        activations = sim_torch.empty(4 * MiB)
        spin(0.06)
        sim_torch.launch(GEMM, 300)
        sim_torch.launch(GEMM, 300)
        sim_torch.synchronize()
        spin(0.06)
        del activations


weights = sim_torch.cuda_malloc(16 * MiB)
loader = DataLoader()
trainer = Trainer()
for _ in range(3):
    trainer.step(next(loader))
    time.sleep(0.5)
sim_torch.cuda_free(weights)
