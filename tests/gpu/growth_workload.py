"""Leaks and growth on a real GPU (issue 14 item 3), for run_growth.sh: over
about 3 s, Cache > leak keeps a 12 MiB tensor every 100 ms in a list it never
empties; Trainer > step allocates a 256 KiB scratch tensor and frees it (the
small pool: its cached block never serves the leak's requests); Model > load
takes 64 MiB once and keeps it. 12 MiB is above the caching allocator's
10 MiB split limit, so each leaked tensor is its own segment, of exactly its
size: the leak grows by the same bytes at both levels.
--stats FILE: the leaked count and bytes, and PyTorch's own figures."""
import argparse
import json
import time

import torch

MiB = 1 << 20
LEAK = 12 * MiB


class Cache:
    def __init__(self):
        self.kept = []

    def leak(self):
        self.kept.append(torch.empty(LEAK, dtype=torch.uint8, device="cuda"))


class Trainer:
    def step(self):
        scratch = torch.empty(256 * 1024, dtype=torch.uint8, device="cuda")
        return scratch.numel()  # freed on return


class Model:
    def load(self):
        self.weights = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stats", required=True)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.cuda.init()
    # Module-level, as a leak in a long-lived object is: locals would be
    # freed when main() returns, before the interpreter's teardown freezes
    # the live set, and the last interval would show nothing left.
    global cache, trainer, model
    cache, trainer, model = Cache(), Trainer(), Model()
    for i in range(args.steps):
        cache.leak()
        trainer.step()
        if i == 5:
            model.load()
        torch.cuda.synchronize()
        time.sleep(0.1)
    with open(args.stats, "w") as f:
        json.dump({"leaked": len(cache.kept), "leaked_bytes": sum(t.numel() for t in cache.kept),
                   "memory_allocated": torch.cuda.memory_allocated(),
                   "memory_reserved": torch.cuda.memory_reserved()}, f)


main()
