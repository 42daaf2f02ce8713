"""One rank of torch.distributed on the real libnccl PyTorch ships (the one
GPU of the `device` machine): N all-reduces of 4 MiB, each waited for, timed
by the workload itself, under `Trainer > step`, so that gpuflame's NCCL
probes and spans are seen on the real library and their cost per call
measured against a bare run. argv: N [SECONDS]: with SECONDS, all-reduces
in batches of N until that long has passed (a process for an agent to find
running). NCCL_OP picks the call: allreduce (in place, a sum), avg (an
all-reduce that averages),
alltoall (all_to_all_single), sendrecv (a send to itself and its receive,
batched). Prints one JSON line. NCCL_LIST_KERNELS=1 prints instead, for
each call, the GPU work it starts on one rank (torch.profiler's names)."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

n = int(sys.argv[1])
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
y = torch.empty_like(x)
op = os.environ.get("NCCL_OP", "allreduce")


def sendrecv():
    ops = [dist.P2POp(dist.isend, x, 0), dist.P2POp(dist.irecv, y, 0)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()


CALLS = {
    "allreduce": lambda: dist.all_reduce(x),
    "avg": lambda: dist.all_reduce(x, op=dist.ReduceOp.AVG),
    "alltoall": lambda: dist.all_to_all_single(y, x),
    "sendrecv": sendrecv,
}


if os.environ.get("NCCL_LIST_KERNELS"):
    from torch.profiler import ProfilerActivity, profile

    for name, call in CALLS.items():
        try:
            call()  # its lazy set-up, outside the profile
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    call()
                torch.cuda.synchronize()
            gpu = sorted({e.name[:80] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
            print(json.dumps({"op": name, "gpu": gpu}))
        except Exception as e:  # noqa: BLE001 (one op's refusal must not hide the others)
            print(json.dumps({"op": name, "error": str(e)[:200]}))
    dist.destroy_process_group()
    sys.exit(0)


class Trainer:
    def step(self):
        CALLS[op]()


trainer = Trainer()
for _ in range(20):  # NCCL's lazy set-up, first kernels
    trainer.step()
torch.cuda.synchronize()
start = time.perf_counter()
calls = 0
while True:
    for _ in range(n):
        trainer.step()
    torch.cuda.synchronize()
    calls += n
    if time.perf_counter() - start >= seconds:
        break
wall = time.perf_counter() - start
print(json.dumps({"op": op, "calls": calls, "us_per_call": round(wall / calls * 1e6, 2), "nccl": torch.cuda.nccl.version()}))
dist.destroy_process_group()
