"""Workload for `gpuflame diff`: run once as `base`, once as `new`. What
changes between the two runs is known to the byte (tests/e2e/diff_e2e_test.cc
and tests/deploy/diff_flamegraph_browser_test.sh check it), all of it still
in use at exit, through the simulated caching allocator (a test fixture):

  KVCache > __init__     64 MiB -> 96 MiB   grows
  Weights > __init__      8 MiB -> 8 MiB    unchanged
  legacy_buffers         12 MiB -> none     only in base
  prefix_cache             none -> 20 MiB   only in new
  activations            10 MiB -> 2 MiB    shrinks
"""
import sys

import sim_torch

MiB = 1 << 20
variant = sys.argv[1]
assert variant in ("base", "new"), variant


class KVCache:
    def __init__(self, blocks):
        self.blocks = []
        for _ in range(blocks):
            self.blocks.append(sim_torch.empty(16 * MiB))


class Weights:
    def __init__(self):
        self.w = sim_torch.empty(8 * MiB)


def legacy_buffers():
    out = []
    for _ in range(3):
        out.append(sim_torch.empty(4 * MiB))
    return out


def prefix_cache():
    return sim_torch.empty(20 * MiB)


def activations(mib):
    return sim_torch.empty(mib * MiB)


kept = [Weights(), KVCache(4 if variant == "base" else 6)]
kept.append(legacy_buffers() if variant == "base" else prefix_cache())
kept.append(activations(10 if variant == "base" else 2))
