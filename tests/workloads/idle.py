"""Workload: why is the GPU idle, on the simulated CUDA runtime and CUPTI
(test fixture: the durations are what the workload asks for, not a GPU's).

  starved  each step a DataLoader > __next__ busy on the CPU for 20 ms,
           then Trainer > step: 10 kernels of 500 us and a synchronise
           (the GPU idles about 80% of the time, in 20 ms gaps under
           DataLoader > __next__): verdict `supply`
  busy     each step 40 kernels of 500 us queued, then a synchronise: the
           GPU is never idle for 5 ms: verdict `busy` (`memory_bound`
           where the simulated NVML says DRAM bandwidth is high)
  tiny     each step 200 elementwise kernels of 2 us, launched one by one
           from Python: the GPU idles between them for the launch's CPU
           time, in gaps far under 5 ms: verdict `launch_bound`
  warmup   load_weights copies 64 MiB, 1.5 s with nothing for the GPU
           (compiling), then the busy loop: the start-up is set apart and
           the steady state judged `busy`
  two      each step 20 kernels of 500 us on CUDA device 0, then 10 on
           device 1, each followed by a synchronise: one process, two GPUs
           (which ones, CUDA_VISIBLE_DEVICES says)

argv: MODE SECONDS (of the loop)."""
import sys
import time

import sim_torch

GEMM = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"
ADD = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEEEEvidT0_T1_"
MiB = 1 << 20


class DataLoader:
    def __next__(self):
        # CPU-bound preprocessing: the main thread stays on the CPU, where
        # the CPU samples see it.
        end = time.perf_counter() + 0.020
        x = 0
        while time.perf_counter() < end:
            x += 1
        return x


class Trainer:
    def step(self, kernels, name=GEMM, micros=500):
        for _ in range(kernels):
            sim_torch.launch(name, micros)
        sim_torch.synchronize()


def load_weights():
    for _ in range(8):
        sim_torch.memcpy_htod(8 * MiB)


def compile_model():
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        pass


mode, seconds = sys.argv[1], float(sys.argv[2])
loader, trainer = DataLoader(), Trainer()
if mode == "warmup":
    load_weights()
    compile_model()
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    if mode == "starved":
        next(loader)
        trainer.step(10)
    elif mode == "tiny":
        trainer.step(200, ADD, 2)
    elif mode == "two":
        for device, kernels in ((0, 20), (1, 10)):
            sim_torch.set_device(device)
            trainer.step(kernels)
    else:
        trainer.step(40)
