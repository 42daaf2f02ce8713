"""Workload: maps the simulated CUDA runtime and driver (test fixtures) at
once, as `import torch` maps libcudart, and initialises CUDA (cuInit, where
the driver loads CUDA_INJECTION64_PATH) only argv[1] seconds later; then runs
kernels.py's kernels. Until cuInit the process has CUDA without the library,
and rightly so."""
import ctypes
import importlib.util
import os
import runpy
import sys
import time

lib_dir = os.environ.get("GPUFLAME_SIM_LIB_DIR") or os.path.dirname(importlib.util.find_spec("sim_torch").origin)
ctypes.CDLL(os.path.join(lib_dir, "libcudart.so.13"))
ctypes.CDLL(os.path.join(lib_dir, "libcuda.so.1"))
time.sleep(float(sys.argv[1]))
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels.py"), run_name="__main__")
