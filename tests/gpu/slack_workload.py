"""Caching-allocator slack on a real GPU (issue 14 item 4): each segment is
made under its own function, so that gpuflame's unused_space per stack is
PyTorch's per-segment total_size - allocated_size (memory_snapshot()).
Elementwise work only: no cuBLAS workspace, so every segment is a tensor's.
Writes PyTorch's figures to --stats just before exiting, tensors still live."""
import argparse
import json

import torch

KiB, MiB = 1 << 10, 1 << 20
p = argparse.ArgumentParser()
p.add_argument("--stats", required=True)
args = p.parse_args()
dev = torch.device("cuda")
kept = {}


def small_pool():
    # One 2 MiB small segment: ten 100 KiB blocks, six freed.
    blocks = [torch.empty(100 * KiB, dtype=torch.uint8, device=dev) for _ in range(10)]
    kept["small"] = blocks[::3]


def split_large():
    # 4 MiB from a 20 MiB segment (kLargeBuffer), split: 16 MiB idle.
    kept["split"] = torch.empty(4 * MiB, dtype=torch.uint8, device=dev)


def cached_large():
    # A 30 MiB segment freed on return: cached, wholly idle.
    t = torch.empty(30 * MiB, dtype=torch.uint8, device=dev)
    return t.sum().item()


def held_large():
    kept["held"] = torch.ones(64 * MiB, dtype=torch.uint8, device=dev)


torch.cuda.init()
small_pool()
split_large()
cached_large()
held_large()
torch.cuda.synchronize()
segments = [{"address": s["address"], "total_size": s["total_size"], "allocated_size": s["allocated_size"],
             "segment_type": s["segment_type"]} for s in torch.cuda.memory_snapshot()]
stats = {"memory_reserved": torch.cuda.memory_reserved(), "memory_allocated": torch.cuda.memory_allocated(),
         "segments": segments}
with open(args.stats, "w") as f:
    json.dump(stats, f)
print(json.dumps(stats, indent=1))
