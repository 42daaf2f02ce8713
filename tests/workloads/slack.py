"""Workload for the caching allocator's slack (unused_space): a known block
layout on the simulated CUDA runtime (test fixture) with its small pool on.

Tokenizer > build makes one 2 MiB small segment and six 256 KiB blocks in
it, then frees four (1.5 MiB of it idle); Model > load holds an 8 MiB
segment whole; Scratch > run's 6 MiB segment is freed on return and given
back by empty_cache; Buffers > grow's 10 MiB one is freed and stays cached;
Tokenizer > refill reuses 512 KiB of the small segment. At the end:
unused 1 MiB under Tokenizer > build, 10 MiB under Buffers > grow, none
under Model > load: reserved 20 MiB, allocated 9 MiB."""
import sim_torch

KiB = 1 << 10
MiB = 1 << 20
sim_torch.set_small_pool(True)


class Tokenizer:
    def build(self):
        self.blocks = []
        for _ in range(6):
            self.blocks.append(sim_torch.empty(256 * KiB))
        del self.blocks[1:5]

    def refill(self):
        self.more = sim_torch.empty(512 * KiB)


class Model:
    def load(self):
        self.weights = sim_torch.empty(8 * MiB)


class Scratch:
    def run(self):
        t = sim_torch.empty(6 * MiB)
        return t.nbytes


class Buffers:
    def grow(self):
        t = sim_torch.empty(10 * MiB)
        return t.nbytes


tokenizer = Tokenizer()
tokenizer.build()
model = Model()
model.load()
Scratch().run()
sim_torch.empty_cache()
Buffers().grow()
tokenizer.refill()
# The allocator's own figures, for the test to compare with.
print(f"reserved {sim_torch.memory_reserved()} allocated {sim_torch.memory_allocated()}", flush=True)
assert sim_torch.memory_reserved() == 20 * MiB, sim_torch.memory_reserved()
assert sim_torch.memory_allocated() == 9 * MiB, sim_torch.memory_allocated()
