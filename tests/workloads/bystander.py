"""Workload: what gpuflame's probes leave in a process (test fixture: the
simulated CUDA runtime, not a GPU). It maps the simulated runtime and, at
cuInit, CUDA_INJECTION64_PATH's libgpuflame_cupti.so, then watches its own
memory every 5 ms: whether cudaMalloc's first byte has ever been a
breakpoint (0xCC, a uprobe) and the most the library's tensor-batch semaphore
(a USDT probe's, raised per process by the kernel) has counted. Run inside
a recording it must see both; beside one, neither.

argv: OUT STOP SECONDS: creates OUT.ready as it starts watching, and writes
JSON to OUT once the file STOP exists or SECONDS have passed, whichever is
first; STOP "-" waits SECONDS."""
import ctypes
import json
import os
import sys
import time

import sim_torch

out, stop, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
malloc_at = ctypes.cast(sim_torch.cudart.cudaMalloc, ctypes.c_void_p).value
original = ctypes.string_at(malloc_at, 1)
library = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])  # already loaded: the same mapping
semaphore = ctypes.c_ushort.in_dll(library, "gpuflame_tensor_batch_semaphore")

open(out + ".ready", "w").close()
seen = {"breakpoint": False, "semaphore_max": 0, "samples": 0, "original_byte": original[0]}
deadline = time.monotonic() + seconds
while time.monotonic() < deadline and not (stop != "-" and os.path.exists(stop)):
    seen["breakpoint"] |= ctypes.string_at(malloc_at, 1) == b"\xcc"
    seen["semaphore_max"] = max(seen["semaphore_max"], semaphore.value)
    seen["samples"] += 1
    sim_torch.cuda_free(sim_torch.cuda_malloc(4096))  # a call through it, probed or not
    time.sleep(0.005)
with open(out + ".tmp", "w") as f:
    json.dump(seen, f)
os.rename(out + ".tmp", out)
