"""GPU workload for tests/gpu/run_on_h200.sh: class methods that allocate
CUDA tensors with sizes we can check byte for byte in gpuflame's profiles.
Prints what PyTorch itself saw, as JSON, for the checker."""
import json
import os
import sys

import torch

MiB = 1 << 20


class GPUModelRunner:
    def __init__(self):
        self.kv_caches = []

    def _allocate_kv_cache_tensors(self):
        # vLLM-like KV-cache preallocation at startup: 8 x 64 MiB
        for _ in range(8):
            self.kv_caches.append(torch.empty(64 * MiB, dtype=torch.uint8, device="cuda"))


class LlamaMLP:
    def __init__(self):
        # 2 x 32 MiB of fp16 weights
        self.up = torch.empty((4096, 4096), dtype=torch.float16, device="cuda")
        self.down = torch.empty((4096, 4096), dtype=torch.float16, device="cuda")

    def forward(self, x):
        return (x @ self.up) @ self.down


def main():
    runner = GPUModelRunner()
    runner._allocate_kv_cache_tensors()
    mlp = LlamaMLP()
    x = torch.ones((16, 4096), dtype=torch.float16, device="cuda")
    for _ in range(3):
        y = mlp.forward(x)
    torch.cuda.synchronize()
    report = {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "segments": torch.cuda.memory_stats().get("segment.all.allocated", 0),
        "y": list(y.shape),
    }
    print(json.dumps(report))
    if os.environ.get("GPUFLAME_WORKLOAD_REPORT"):
        with open(os.environ["GPUFLAME_WORKLOAD_REPORT"], "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
