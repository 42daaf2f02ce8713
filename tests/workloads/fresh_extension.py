"""Workload: a C++ extension (tests/fixtures/ext_alloc.cc, -O2 without frame
pointers) loaded with ctypes a second after CUDA started, then called three
times from Loader > load: each call's cudaMalloc (1 MiB, kept) must show the
whole chain through ctypes and the extension, the first call as the others.

An argument names another build of it, relative to the simulated runtime's
directory (ext/stripped/libext_hidden.so: hidden and stripped); the address
it was loaded at is printed, `base 0x...`, for tests that compare processes."""
import ctypes
import os
import sys
import time

import sim_torch

warm = sim_torch.empty(1 << 20)  # CUDA and the caching allocator up: probes attached
time.sleep(1.0)  # past gpuflame's rescans of this process
path = os.path.join(os.environ["GPUFLAME_SIM_LIB_DIR"], sys.argv[1] if len(sys.argv) > 1 else "ext/libext_alloc.so")
ext = ctypes.CDLL(path)
ext.ext_alloc_entry.restype = ctypes.c_void_p
ext.ext_alloc_entry.argtypes = [ctypes.c_size_t]
if len(sys.argv) > 1:
    with open("/proc/self/maps") as maps:
        base = min(int(line.split("-")[0], 16) for line in maps if line.rstrip().endswith(os.path.realpath(path)))
    print(f"base 0x{base:x}", flush=True)


class Loader:
    def load(self):
        return [ext.ext_alloc_entry(1 << 20) for _ in range(3)]


kept = Loader().load()
