"""Workload for the flame graph page's browser test
(tests/deploy/flamegraph_page_browser_test.sh), through the simulated CUDA
runtime (a test fixture). What the page must show of it:

  - a helper process (viewer_helper.py) beside this one, both burning CPU:
    process_cpu has two processes;
  - Loader > load allocating on two lines, 8 MiB and 24 MiB: one frame whose
    tooltip splits its 32 MiB by line;
  - a `main` here and one in viewer_helper.py: two functions of one name;
  - 120 functions layer_000 ... layer_119 allocating 64 KiB each: more rows
    than the functions table shows at once.
"""
import os
import subprocess
import sys
import time

import sim_torch

KiB = 1 << 10
MiB = 1 << 20


def burn(seconds):
    deadline = time.process_time() + seconds
    s = 0
    while time.process_time() < deadline:
        for i in range(10000):
            s += i * i % 7
    return s


class Loader:
    def load(self):
        self.small = sim_torch.empty(8 * MiB)
        self.large = sim_torch.empty(24 * MiB)


def make_layers(n):
    # The functions stay alive with their tensors: gpuflame names a frame
    # from its code object, which must not be freed and reused meanwhile.
    kept = []
    for i in range(n):
        ns = {}
        exec(f"def layer_{i:03d}(empty, size):\n    return empty(size)\n", ns)
        layer = ns[f"layer_{i:03d}"]
        kept.append((layer, layer(sim_torch.empty, 64 * KiB)))
    return kept


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    helper = subprocess.Popen([sys.executable, os.path.join(here, "viewer_helper.py")])
    loader = Loader()
    loader.load()
    layers = make_layers(120)
    burn(0.4)
    if helper.wait() != 0:
        sys.exit("the helper failed")
    return loader, layers


if __name__ == "__main__":
    kept = main()
