"""Checks kernel time from a real GPU run (tests/gpu/run_kernel_time.sh):
gpuflame's gpu_kernel time under Trainer > step against torch.profiler's GPU
time for the same steps in a separate run of the same workload (CUPTI takes
one subscriber per process: both cannot watch one run), and prints the
heaviest kernels with their stacks."""
import json
import sys


def load(path):
    stacks = {}
    with open(path) as f:
        for line in f:
            stack, value = line.rstrip("\n").rsplit(" ", 1)
            stacks[stack] = stacks.get(stack, 0) + int(value)
    return stacks


def main(rec_dir, prof_json):
    time = load(f"{rec_dir}/gpu_kernel.time.folded")
    launches = load(f"{rec_dir}/gpu_kernel.launches.folded")
    total = sum(time.values())
    step = sum(v for s, v in time.items() if "Trainer > step" in s.split(";"))
    prof_us = json.load(open(prof_json))["torch_profiler_gpu_us"]
    ratio = step / 1e3 / prof_us if prof_us else 0
    print(f"gpuflame gpu_kernel: {total / 1e6:.2f} ms in all, {step / 1e6:.2f} ms under Trainer > step, "
          f"{sum(launches.values())} kernels")
    print(f"torch.profiler (separate run, same steps): {prof_us / 1e3:.2f} ms; ratio {ratio:.3f}")
    by_leaf = {}
    for s, v in time.items():
        leaf = s.split(";")[-1]
        by_leaf[leaf] = by_leaf.get(leaf, 0) + v
    print("heaviest kernels:")
    for leaf, v in sorted(by_leaf.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {v / 1e6:8.2f} ms  {leaf[:150]}")
    # The frame above each kernel: the API it was launched through (an
    # unnamed driver entry shows as libcuda.so...+0x...).
    by_api, kernels_of = {}, {}
    for s, v in launches.items():
        frames = s.split(";")
        api = frames[-2] if len(frames) >= 2 else "[none]"
        by_api[api] = by_api.get(api, 0) + v
        k = kernels_of.setdefault(api, {})
        k[frames[-1]] = k.get(frames[-1], 0) + v
    print("launches by launching API (its most launched kernel, and the frame under the API):")
    for api, v in sorted(by_api.items(), key=lambda kv: -kv[1])[:10]:
        top = max(kernels_of[api].items(), key=lambda kv: kv[1])[0]
        under = {s.split(";")[-3] for s in launches if len(s.split(";")) >= 3 and s.split(";")[-2] == api}
        print(f"  {v:8d}  {api[:60]}  [{top[:70]}]  under {sorted(under)[:2]}")
    print("heaviest stacks (Python frames and the launching API, kernel last):")
    for s, v in sorted(time.items(), key=lambda kv: -kv[1])[:3]:
        print(f"--- {v / 1e6:.2f} ms")
        for i, f in enumerate(s.split(";")):
            print(f"  {'  ' * min(i, 30)}{f[:160]}")
    summary = json.load(open(f"{rec_dir}/summary.json"))
    print("join:", json.dumps(summary["gpu_kernels"]), "warnings:", summary["warnings"])
    ok = abs(ratio - 1) <= 0.10 and step > 0
    print("kernel time within 10% of torch.profiler:", "yes" if ok else "NO")
    return 0 if ok else 1


sys.exit(main(sys.argv[1], sys.argv[2]))
