"""Prints a gpuflame output directory's GPU-memory flame graph in the
terminal (widest paths first), and where the interactive one is."""
import os
import sys

MiB = 1 << 20


def load(path):
    tree = {}
    total = 0
    with open(path) as f:
        for line in f:
            stack, value = line.rstrip("\n").rsplit(" ", 1)
            value = int(value)
            total += value
            node = tree
            for frame in stack.split(";"):
                if frame == "<interpreter trampoline>":
                    continue
                entry = node.setdefault(frame, [0, {}])
                entry[0] += value
                node = entry[1]
    return tree, total


def show(tree, total, depth=0, width=40, max_depth=12):
    for name, (value, children) in sorted(tree.items(), key=lambda kv: -kv[1][0]):
        if value * 50 < total or depth > max_depth:
            continue
        bar = "#" * max(1, int(width * value / total))
        print(f"{value / MiB:9.1f} MiB {bar:<{width}} {'  ' * depth}{name}")
        show(children, total, depth + 1, width, max_depth)


def main(out):
    for profile in ("torch_memory", "gpu_memory"):
        path = os.path.join(out, f"{profile}.inuse_space.folded")
        if not os.path.exists(path):
            continue
        tree, total = load(path)
        print(f"== {profile}: in use {total / MiB:.1f} MiB (<interpreter trampoline> hidden)")
        show(tree, total)
        print()
    print(f"Interactive flame graph (self/total on hover, search, zoom): "
          f"{os.path.abspath(os.path.join(out, 'flamegraph.html'))}")


if __name__ == "__main__":
    main(sys.argv[1])
