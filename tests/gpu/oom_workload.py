"""Runs out of GPU memory on purpose (tests/gpu/run_oom.sh), with real
PyTorch, and writes PyTorch's own figures for the check beside gpuflame's
capture.

    oom_workload.py MODE --stats FILE
    oom_workload.py --check RECORD_DIR --stats FILE --mode MODE [--probes]

What it holds when its allocation fails, sized from the GPU's total memory T
(every size a multiple of 2 MiB, so PyTorch asks cudaMalloc for it as is):
  load_weights   about 0.55 T in 8 blocks, live
  warm_up        0.20 T allocated and freed: a cached segment
Then Trainer > step asks for:
  rescue  0.30 T: cudaMalloc fails, PyTorch frees its cache, the retry fits
  raise   0.60 T: fails, frees the cache, fails again: OutOfMemoryError, caught
  exit    as raise, then os._exit(3) at once (the capture must survive it)

--check compares summary.json's capture with what PyTorch said just before
the step (memory_allocated, memory_reserved, memory_snapshot's segments) and
after it (num_ooms, num_alloc_retries), prints both side by side and exits
1 on any mismatch.
"""
import argparse
import json
import os
import sys

MiB = 1 << 20


def round_mib2(n):
    return max(2 * MiB, (int(n) // (2 * MiB)) * (2 * MiB))


def run(mode, stats_path):
    import torch

    total = torch.cuda.mem_get_info()[1]
    block = round_mib2(0.55 * total / 8)

    def load_weights():
        return [torch.empty(block, dtype=torch.uint8, device="cuda") for _ in range(8)]

    def warm_up():
        scratch = torch.empty(round_mib2(0.20 * total), dtype=torch.uint8, device="cuda")
        del scratch  # cached by the allocator

    class Trainer:
        def __init__(self, weights):
            self.weights = weights
            self.activations = None

        def step(self, nbytes):
            self.activations = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    trainer = Trainer(load_weights())
    warm_up()
    torch.cuda.synchronize()
    segments = torch.cuda.memory_snapshot()
    before = {
        "allocated": torch.cuda.memory_allocated(),
        "reserved": torch.cuda.memory_reserved(),
        "snapshot_total_size": sum(s["total_size"] for s in segments),
        "snapshot_allocated_size": sum(s["allocated_size"] for s in segments),
        "snapshot_segments": len(segments),
        "device_total": total,
        "device_free": torch.cuda.mem_get_info()[0],
    }
    nbytes = round_mib2((0.30 if mode == "rescue" else 0.60) * total)
    out_of_memory = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)  # or torch.cuda's, in older versions
    try:
        trainer.step(nbytes)
        outcome = "retry_succeeded"
    except out_of_memory:
        outcome = "raised"
    stats = torch.cuda.memory_stats()
    after = {k: stats.get(k, 0) for k in ("num_ooms", "num_alloc_retries", "allocated_bytes.all.current",
                                          "reserved_bytes.all.current")}
    report = {"mode": mode, "requested": nbytes, "outcome": outcome, "before": before, "after": after}
    with open(stats_path, "w") as f:
        json.dump(report, f)
    print("oom_workload:", json.dumps(report), flush=True)
    if mode == "exit":
        os._exit(3)


def check(record_dir, stats_path, mode, probes):
    torch_says = json.load(open(stats_path))
    summary = json.load(open(os.path.join(record_dir, "summary.json")))
    oom = summary.get("oom", {})
    captures = oom.get("captures", [])
    ok = True

    def same(what, ours, theirs, good=None):
        nonlocal ok
        good = ours == theirs if good is None else good
        ok &= good
        print(f"  {'OK      ' if good else 'MISMATCH'} {what}: gpuflame {ours}  PyTorch {theirs}")

    print(f"== {mode}{' (probes)' if probes else ''}: {len(captures)} capture(s), episodes {oom.get('episodes')}")
    if len(captures) != 1:
        print("  MISMATCH: expected one capture; warnings:", summary.get("warnings"))
        return False
    c = captures[0]
    b, a = torch_says["before"], torch_says["after"]
    print("  summary:", c["summary"])
    same("outcome", c["outcome"], torch_says["outcome"])
    same("requested bytes", c["requested_bytes"], torch_says["requested"])
    same("device live at the failure = memory_reserved() before it", c["device_live_bytes"], b["reserved"])
    same("  = memory_snapshot() segments' total_size", c["device_live_bytes"], b["snapshot_total_size"])
    same("tensor live = memory_allocated() before it", c["tensor_live_bytes"], b["allocated"])
    same("  = memory_snapshot() segments' allocated_size", c["tensor_live_bytes"], b["snapshot_allocated_size"])
    same("cached and unused = reserved - allocated", c["cached_unused_bytes"], b["reserved"] - b["allocated"])
    # NVML's total is the whole framebuffer; CUDA's leaves out what the driver
    # reserves for itself (615 MiB on the H200: 140.40 against 139.80 GiB).
    nvml_total = c["gpus"][0]["total_bytes"] if c["gpus"] else None
    same("GPU total memory (NVML) >= mem_get_info()[1], within 2%", nvml_total, b["device_total"],
         good=nvml_total is not None and b["device_total"] <= nvml_total <= b["device_total"] * 1.02)
    # PyTorch retries once after freeing its cache (num_alloc_retries): every call failed but a
    # successful retry.
    same("failed cudaMalloc calls = 1 + num_alloc_retries, less a retry that succeeded", c["failed_calls"],
         1 + a["num_alloc_retries"] - (torch_says["outcome"] == "retry_succeeded"))
    if torch_says["outcome"] == "raised":
        r = c["torch_report"] or {}
        same("PyTorch's report: bytes", r.get("bytes"), torch_says["requested"])
        same("PyTorch's report: allocated = allocated_bytes.all.current", r.get("allocated_bytes"),
             a["allocated_bytes.all.current"])
        same("PyTorch's report: reserved = reserved_bytes.all.current", r.get("reserved_bytes"),
             a["reserved_bytes.all.current"])
        same("num_ooms", oom.get("episodes"), a["num_ooms"])
    in_step = "Trainer > step" in (c["stack"] or "")
    ok &= in_step
    print(f"  {'OK      ' if in_step else 'MISMATCH'} the request's stack runs through Trainer > step: {c['stack']}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", choices=("rescue", "raise", "exit"))
    ap.add_argument("--stats", required=True)
    ap.add_argument("--check")
    ap.add_argument("--mode", dest="check_mode")
    ap.add_argument("--probes", action="store_true")
    args = ap.parse_args()
    if args.check:
        sys.exit(0 if check(args.check, args.stats, args.check_mode, args.probes) else 1)
    run(args.mode, args.stats)


main()
