"""Checks a gpuflame output directory from torch_workload.py: the class
methods are the top Python frames with the right bytes in both profiles."""
import json
import sys

MiB = 1 << 20


def load(path):
    stacks = {}
    try:
        with open(path) as f:
            for line in f:
                stack, value = line.rstrip("\n").rsplit(" ", 1)
                stacks[stack] = stacks.get(stack, 0) + int(value)
    except FileNotFoundError:
        pass
    return stacks


def bytes_under(stacks, frame):
    return sum(v for s, v in stacks.items() if frame in s.split(";"))


def deepest_python(stack):
    frames = [f for f in stack.split(";") if f and not f.startswith("<interpreter")]
    return frames[-2] if len(frames) >= 2 else "?"


def main(out_dir):
    ok = True
    with open(f"{out_dir}/workload.json") as f:
        seen_by_torch = json.load(f)
    for profile in ("gpu_memory", "torch_memory"):
        st = load(f"{out_dir}/{profile}.alloc_space.folded")
        total = sum(st.values())
        kv = bytes_under(st, "GPUModelRunner > _allocate_kv_cache_tensors")
        mlp = bytes_under(st, "LlamaMLP > __init__")
        print(f"{profile}: total {total / MiB:.1f} MiB, "
              f"GPUModelRunner > _allocate_kv_cache_tensors {kv / MiB:.1f} MiB, "
              f"LlamaMLP > __init__ {mlp / MiB:.1f} MiB")
        top = sorted(st.items(), key=lambda kv: -kv[1])[:6]
        for s, v in top:
            print(f"   {v / MiB:9.2f} MiB  {s}")
        if profile == "torch_memory":
            # Tensor level: exactly the tensors each method created.
            ok &= kv == 8 * 64 * MiB and mlp == 64 * MiB
        else:
            # Device level: the caching allocator's segments (cudaMalloc, or
            # cuMemCreate chunks under expandable_segments) add up to what
            # PyTorch reports as reserved; the KV cache needs at least its size.
            segments = sum(v for s, v in st.items()
                           if s.endswith(";cudaMalloc") or s.endswith(";cuMemCreate"))
            print(f"   segments {segments} bytes vs torch.cuda.memory_reserved() "
                  f"{seen_by_torch['memory_reserved']}")
            ok &= segments == seen_by_torch["memory_reserved"] and kv >= 8 * 64 * MiB
    print("CHECK", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
