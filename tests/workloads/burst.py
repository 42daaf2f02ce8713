"""Workload: a burst of device allocations from several threads at once,
faster than a small ring buffer drains (simulated CUDA runtime: a test
fixture). Each thread allocates and frees in a loop and keeps one
allocation in four. Prints what was allocated and what is still held, so
the profiles' totals can be checked exactly.

argv: threads, allocations per thread, and optionally "stall-parent": the
workload then stops its parent (gpuflame record) for the burst and resumes
it after, so the ring fills whatever the machine's speed (a reader that
keeps up would otherwise leave a loss test with nothing to check); then
optionally "tensors": the allocations are tensors of the simulated caching
allocator instead of cudaMalloc's."""
import json
import os
import signal
import sys
import threading

import sim_torch

threads, per_thread = int(sys.argv[1]), int(sys.argv[2])
kept = [[] for _ in range(threads)]
allocated = [0] * threads
start = threading.Barrier(threads)


tensors = len(sys.argv) > 4 and sys.argv[4] == "tensors"
held = [[] for _ in range(threads)]


def work(t):
    start.wait()
    for i in range(per_thread):
        size = ((i * 7 + t) % 64 + 1) * 4096
        p = sim_torch.empty(size) if tensors else sim_torch.cuda_malloc(size)
        allocated[t] += size
        if i % 4 == 0:
            kept[t].append(size)
            held[t].append(p)
        elif tensors:
            del p
        else:
            sim_torch.cuda_free(p)


workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
stall = len(sys.argv) > 3 and sys.argv[3] == "stall-parent"
if stall:
    os.kill(os.getppid(), signal.SIGSTOP)
try:
    for w in workers:
        w.start()
    for w in workers:
        w.join()
finally:
    if stall:
        os.kill(os.getppid(), signal.SIGCONT)
print(json.dumps({"allocated": sum(allocated), "allocations": threads * per_thread,
                  "in_use": sum(sum(k) for k in kept)}), flush=True)
