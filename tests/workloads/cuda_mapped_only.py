"""Workload: maps the simulated CUDA driver and runtime (test fixtures) and
never initialises CUDA, as nvidia-smi and monitoring tools map libcuda, for
argv[1] seconds; with "alloc" as argv[2], imports sim_torch (cuInit) and
allocates 1 MiB first, then waits as long."""
import ctypes
import importlib.util
import os
import sys
import time

if len(sys.argv) > 2 and sys.argv[2] == "alloc":
    import sim_torch

    sim_torch.cuda_malloc(1 << 20)
else:
    lib_dir = os.environ.get("GPUFLAME_SIM_LIB_DIR") or os.path.dirname(importlib.util.find_spec("sim_torch").origin)
    ctypes.CDLL(os.path.join(lib_dir, "libcudart.so.13"))
    ctypes.CDLL(os.path.join(lib_dir, "libcuda.so.1"))
print(os.getpid(), flush=True)
time.sleep(float(sys.argv[1]))
