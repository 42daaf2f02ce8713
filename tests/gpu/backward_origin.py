"""Backward attributed to its Python caller, on a real GPU (issue 12).

A small training loop (MLP blocks with LayerNorm and GELU, AdamW) whose
loss.backward() runs on PyTorch's autograd engine thread (`pt_autograd_0`).
Under `gpuflame record`, the engine thread's tensor allocations and kernel
launches must land under `Trainer > step` > ... > `<autograd engine>`.

  python3 backward_origin.py [--steps N] [--stats FILE] [--profile FILE]
      runs the loop; --stats writes torch.cuda.memory_stats() at the end,
      --profile runs it under torch.profiler and writes its GPU time
  python3 backward_origin.py --check OUT [--stats FILE] [--profile FILE]
      reads `gpuflame record -o OUT`'s folded profiles and summary.json and
      prints what share of tensor bytes and kernel time has a Python caller,
      how much went through <autograd engine>, and compares with the files
      above; exits 1 if the engine hook was not live or a share is < 99 %.
      With --probes: a `record --tensor-events probes --no-kernel-time` run
      (the agent's path where the workload does not load the library).

Run (on the GPU host, gpuflame built there or from scripts/gpu-bundle.sh):
  sudo build/gpuflame record -o /tmp/bw -- python3 tests/gpu/backward_origin.py --stats /tmp/bw-stats.json
  python3 tests/gpu/backward_origin.py --profile /tmp/bw-prof.json
  python3 tests/gpu/backward_origin.py --check /tmp/bw --stats /tmp/bw-stats.json --profile /tmp/bw-prof.json
"""
import argparse
import json
import sys

from check_profile import load  # folded stacks: "a;b;c value" per line


class Trainer:
    def __init__(self, torch, width=2048, depth=6):
        nn = torch.nn
        blocks = []
        for _ in range(depth):
            blocks += [nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.LayerNorm(width)]
        self.torch = torch
        self.model = nn.Sequential(*blocks).cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.width = width

    def step(self):
        torch = self.torch
        x = torch.randn(256, self.width, device="cuda")
        loss = self.model(x).float().pow(2).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def run(args):
    import torch

    trainer = Trainer(torch)
    for _ in range(3):  # warm-up: the engine thread starts at the first backward
        trainer.step()
    torch.cuda.synchronize()
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                trainer.step()
            torch.cuda.synchronize()
        # Device events only (kernels, memcpy, memset), as tests/gpu/kernel_workload.py counts them.
        gpu_us = sum(e.device_time_total for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        json.dump({"torch_profiler_gpu_us": gpu_us, "steps": args.steps}, open(args.profile, "w"))
    else:
        for _ in range(args.steps):
            trainer.step()
        torch.cuda.synchronize()
    if args.stats:
        json.dump(torch.cuda.memory_stats(), open(args.stats, "w"))
    print(f"{args.steps} steps done")


def share(stacks, pred):
    total = sum(stacks.values())
    part = sum(v for s, v in stacks.items() if pred(s.split(";")))
    return part, total, (part / total if total else 0.0)


def check(args):
    out = args.check
    ok = True
    summary = json.load(open(f"{out}/summary.json"))
    hooks = [p.get("autograd_hook") for p in summary["processes"] if p.get("torch")]
    print(f"autograd hook per torch process: {hooks}; inprocess: {json.dumps(summary['inprocess'])}")
    for w in summary.get("warnings", []):
        print(f"warning: {w}")
    if "live" not in hooks and not args.probes:
        print("FAIL: the Engine::execute hook did not go live (see autograd_hook above)")
        ok = False

    def has_python(frames):
        return "<module>" in frames

    def in_step(frames):
        return "Trainer > step" in frames

    def engine(frames):
        return "<autograd engine>" in frames

    profiles = [("torch_memory alloc_space", "torch_memory.alloc_space.folded"),
                ("torch_memory inuse_space", "torch_memory.inuse_space.folded")]
    if not args.probes:
        profiles.append(("gpu_kernel time", "gpu_kernel.time.folded"))
    for name, path in profiles:
        stacks = load(f"{out}/{path}")
        p, total, r = share(stacks, has_python)
        s, _, rs = share(stacks, in_step)
        e, _, re_ = share(stacks, engine)
        print(f"{name}: total {total}; with a Python caller {r:.2%}; under Trainer > step {rs:.2%}; "
              f"through <autograd engine> {re_:.2%}")
        if total and r < 0.99 and "inuse" not in name:
            print(f"FAIL: {name}: {1 - r:.2%} has no Python caller; heaviest such stacks:")
            for st, v in sorted(((st, v) for st, v in stacks.items() if not has_python(st.split(";"))),
                                key=lambda kv: -kv[1])[:5]:
                print(f"  {v}  {st[:300]}")
            ok = False
    kernels = {} if args.probes else load(f"{out}/gpu_kernel.time.folded")
    print("heaviest kernel stacks through <autograd engine>:")
    for st, v in sorted(((st, v) for st, v in kernels.items() if engine(st.split(";"))), key=lambda kv: -kv[1])[:3]:
        frames = st.split(";")
        i = frames.index("<autograd engine>")
        print(f"  {v / 1e6:.2f} ms  {' > '.join(frames[max(0, i - 4):i + 1])} > ... > {frames[-1][:100]}")
    if args.stats:
        stats = json.load(open(args.stats))
        alloc = sum(load(f"{out}/torch_memory.alloc_space.folded").values())
        truth = stats.get('allocated_bytes.all.allocated') or 0
        print(f"torch_memory alloc_space {alloc} vs memory_stats allocated_bytes.all.allocated "
              f"{truth} (ratio {alloc / truth if truth else 0:.4f}; exact: 1, sampled: an estimate)")
    if args.profile and not args.probes:
        prof = json.load(open(args.profile))
        step_ns, _, _ = share(kernels, in_step)
        print(f"gpu_kernel under Trainer > step: {step_ns / 1e6:.2f} ms; torch.profiler (separate run, same steps): "
              f"{prof['torch_profiler_gpu_us'] / 1e3:.2f} ms")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--stats")
    ap.add_argument("--profile")
    ap.add_argument("--check")
    ap.add_argument("--probes", action="store_true",
                    help="with --check: a memory-only run whose tensor events came through the probes")
    args = ap.parse_args()
    if args.check:
        sys.exit(check(args))
    run(args)


if __name__ == "__main__":
    main()
