"""One rank of torch.distributed on the real libnccl PyTorch ships (the one
GPU of the `device` machine): N all-reduces of 4 MiB, each waited for, timed
by the workload itself, under `Trainer > step`, so that gpuflame's NCCL
probes and spans are seen on the real library and their cost per call
measured against a bare run. argv: N. Prints one JSON line."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

n = int(sys.argv[1])
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")


class Trainer:
    def step(self):
        dist.all_reduce(x)


trainer = Trainer()
for _ in range(20):  # NCCL's lazy set-up, first kernels
    trainer.step()
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(n):
    trainer.step()
torch.cuda.synchronize()
wall = time.perf_counter() - start
print(json.dumps({"calls": n, "us_per_call": round(wall / n * 1e6, 2), "nccl": torch.cuda.nccl.version()}))
dist.destroy_process_group()
