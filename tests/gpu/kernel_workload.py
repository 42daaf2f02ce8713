"""GPU workload for kernel time (tests/gpu/run_kernel_time.sh): a conv +
matmul model whose kernels launch from known class methods, and a loop of
tiny kernels for the per-launch cost. Prints timings as JSON.

  --steps N         model steps (after 5 warm-up steps)
  --tiny N          tiny-kernel launches (torch.add on 16 floats)
  --scale N         N times the batch (same kernels, N times the work each)
  --profile FILE    also run under torch.profiler and write its total GPU
                    time (kernels, memcpy, memset) to FILE
"""
import argparse
import json
import time

import torch
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class MLPHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4096, 8192)
        self.down = nn.Linear(8192, 4096)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


class Trainer:
    def __init__(self, scale=1):
        self.conv = ConvBlock().cuda().to(torch.bfloat16)
        self.mlp = MLPHead().cuda().to(torch.bfloat16)
        self.images = torch.randn(32 * scale, 64, 56, 56, device="cuda", dtype=torch.bfloat16)
        self.tokens = torch.randn(2048 * scale, 4096, device="cuda", dtype=torch.bfloat16)

    @torch.no_grad()
    def step(self):
        a = self.conv(self.images)
        b = self.mlp(self.tokens)
        return a.sum() + b.sum()


def tiny_launches(n):
    x = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def run(trainer, steps):
    for _ in range(5):
        trainer.step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--tiny", type=int, default=20000)
    p.add_argument("--profile", default="")
    p.add_argument("--scale", type=int, default=1)
    a = p.parse_args()
    torch.cuda.init()
    trainer = Trainer(a.scale)
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run(trainer, a.steps)
        total_us = sum(e.device_time_total for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        json.dump({"torch_profiler_gpu_us": total_us}, open(a.profile, "w"))
        return
    step_ms = run(trainer, a.steps)
    launch_us = tiny_launches(a.tiny) if a.tiny else 0.0
    print(json.dumps({"step_ms": step_ms, "tiny_launch_us": launch_us}))


main()
