"""Workload: a C++ extension (tests/fixtures/ext_alloc.cc, -O2 without frame
pointers) loaded with ctypes a second after CUDA started, then called three
times from Loader > load: each call's cudaMalloc (1 MiB, kept) must show the
whole chain through ctypes and the extension, the first call as the others."""
import ctypes
import os
import time

import sim_torch

warm = sim_torch.empty(1 << 20)  # CUDA and the caching allocator up: probes attached
time.sleep(1.0)  # past gpuflame's rescans of this process
ext = ctypes.CDLL(os.path.join(os.environ["GPUFLAME_SIM_LIB_DIR"], "ext", "libext_alloc.so"))
ext.ext_alloc_entry.restype = ctypes.c_void_p
ext.ext_alloc_entry.argtypes = [ctypes.c_size_t]


class Loader:
    def load(self):
        return [ext.ext_alloc_entry(1 << 20) for _ in range(3)]


kept = Loader().load()
