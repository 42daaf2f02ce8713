"""The overhead harness's workload: tensor alloc + free in a loop, 20 Python
frames deep, timed in rounds the harness starts over stdin. Uses PyTorch on a
GPU when there is one, else the simulated CUDA runtime (test fixture)."""
import os
import sys
import time

try:
    import torch

    if not torch.cuda.is_available() or os.environ.get("GPUFLAME_BENCH_SIM"):
        raise ImportError

    def alloc():
        return torch.empty(4096, dtype=torch.uint8, device="cuda")

    BACKEND = "torch-cuda"
except ImportError:
    import sim_torch

    def alloc():
        return sim_torch.empty(4096)

    BACKEND = "simulated"


class Step:
    def loop(self, n):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            x = alloc()
            del x
        return time.perf_counter_ns() - t0


def at_depth(depth, n):
    if depth == 0:
        return Step().loop(n)
    return at_depth(depth - 1, n)


def main():
    at_depth(20, 1000)  # warm the caching allocator
    print(f"ready {os.getpid()} {BACKEND}", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        n = int(cmd[1])
        print(at_depth(20, n), flush=True)


main()
