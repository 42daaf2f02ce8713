"""Workload: loads the simulated CUDA runtime (a test fixture) only after
argv[1] seconds, then allocates and says "done": a gate that comes late,
while the profiler may no longer be able to lift it."""
import sys
import time

time.sleep(float(sys.argv[1]))
import sim_torch  # noqa: E402  (the point is to load it late)

sim_torch.cuda_malloc(1 << 20)
print("done", flush=True)
