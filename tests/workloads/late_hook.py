"""Workload for tests/e2e: started with CUDA_INJECTION64_PATH naming
libgpuflame_cupti.so, so gpuflame expects its tensor events in-process, but
it drops the variable before CUDA starts (the library is mapped, never
initialised, so its hook never goes live). Probes must take over within
3 s and count the tensor made after that. Expected: torch_memory holds
8 MiB under `late_tensor`, through probes."""
import ctypes
import os
import time

ctypes.CDLL(os.environ.pop("CUDA_INJECTION64_PATH"))  # mapped; CUDA will not start it
import sim_torch  # noqa: E402

MiB = 1 << 20
time.sleep(6)  # the take-over is due 3 s after the mapping, checked once a second


def late_tensor():
    return sim_torch.empty(8 * MiB)


t = late_tensor()
