"""Why is the GPU idle, on a real GPU: the three cases of the seeds' method as
real PyTorch programs, timed by the workload itself so gpuflame's figures
can be checked against it.

  starved  a small MLP's training step behind a DataLoader > __next__ that
           spends 20 ms on the CPU (Python preprocessing) per step; the
           step synchronises: the GPU idles most of the time, under
           DataLoader > __next__. Expected verdict: supply
  tiny     Model > forward: 300 elementwise ops on a 4096-element tensor
           per step, each its own microseconds-long kernel, launched one by
           one from Python. Expected: launch_bound
  matmul   Model > forward: ten 8192 x 8192 bf16 matmuls per step, queued
           back to back. Expected: busy (not memory bound: GEMMs this large
           are bound by the tensor cores, not DRAM)
  stream   Model > forward: ten copies of a 2 GiB tensor into another per
           step, back to back: each kernel reads and writes DRAM and does
           nothing else. Expected: memory_bound (where GPM is available)

argv: MODE STEPS [torch-profiler]. With torch-profiler the whole run (model
set-up included) is recorded by torch.profiler and the kernels it saw are
counted from its Chrome trace, for comparison with a gpuflame record of a
run without it. Prints one JSON line: steps, the loop's wall time, the GPU
time CUDA events measured around each step's GPU work."""
import json
import os
import sys
import tempfile
import time

import torch

mode, steps = sys.argv[1], int(sys.argv[2])
profiled = len(sys.argv) > 3 and sys.argv[3] == "torch-profiler"
prof = None
if profiled:
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
    prof.__enter__()
dev = torch.device("cuda")
torch.manual_seed(0)


class DataLoader:
    def __next__(self):
        end = time.perf_counter() + 0.020
        x = 0
        while time.perf_counter() < end:
            x += 1
        return torch.randn(256, 4096).pin_memory()


class Trainer:
    def __init__(self):
        self.model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                                         torch.nn.Linear(4096, 4096)).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)

    def step(self, batch):
        loss = self.model(batch).float().pow(2).mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


class Tiny:
    def __init__(self):
        self.x = torch.zeros(4096, device=dev)

    def forward(self):
        for _ in range(300):
            self.x.add_(1.0)


class Matmul:
    def __init__(self):
        self.a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        self.b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

    def forward(self):
        for _ in range(10):
            self.c = self.a @ self.b


class Stream:
    def __init__(self):
        self.a = torch.empty(1 << 30, device=dev, dtype=torch.bfloat16).normal_()
        self.b = torch.empty_like(self.a)

    def forward(self):
        for _ in range(10):
            self.b.copy_(self.a)


if mode == "starved":
    loader, trainer = DataLoader(), Trainer()
    work = lambda: trainer.step(next(loader).to(dev, non_blocking=True))
    warm = lambda: trainer.step(torch.randn(256, 4096, device=dev))
else:
    model = {"tiny": Tiny, "matmul": Matmul, "stream": Stream}[mode]()
    work = warm = model.forward
for _ in range(5):  # warm-up: cuBLAS handles, allocator segments
    warm()
torch.cuda.synchronize()
gpu_ms = 0.0
start = time.monotonic()
for _ in range(steps):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    work()
    b.record()
    b.synchronize()
    gpu_ms += a.elapsed_time(b)
wall = time.monotonic() - start
result = {"mode": mode, "steps": steps, "loop_s": round(wall, 4), "gpu_event_s": round(gpu_ms / 1e3, 4),
          "gpu_event_busy": round(gpu_ms / 1e3 / wall, 4)}
if prof is not None:
    prof.__exit__(None, None, None)
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    result["torch_profiler"] = {"kernels": len(kernels), "kernel_s": round(sum(e["dur"] for e in kernels) / 1e6, 6),
                                "copies_and_memsets": len(copies)}
print(json.dumps(result))
