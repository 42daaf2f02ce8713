"""gpuflame's bundled example: an LLM-serving-shaped program.

Startup preallocates the KV cache and loads weights; then a decode loop
allocates and frees activations. With PyTorch and a CUDA GPU it uses them.
Without, it runs on gpuflame's simulated CUDA runtime (a test fixture that
hands out fake device addresses: the profile shows the program's real Python
stacks and sizes, but no real GPU was involved).
"""
import sys

MiB = 1 << 20

try:
    import torch

    if not torch.cuda.is_available():
        raise ImportError("no CUDA device")

    def empty(nbytes):
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    BACKEND = f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}"
except ImportError:
    import sim_torch

    empty = sim_torch.empty
    BACKEND = "the simulated CUDA runtime (test fixture, no GPU)"


class LlamaMLP:
    def __init__(self):
        self.gate_up = empty(48 * MiB)
        self.down = empty(24 * MiB)

    def forward(self):
        activation = empty(6 * MiB)
        return activation


class LlamaAttention:
    def __init__(self):
        self.qkv = empty(24 * MiB)
        self.o_proj = empty(8 * MiB)


class DecoderLayer:
    def __init__(self):
        self.self_attn = LlamaAttention()
        self.mlp = LlamaMLP()


class GPUModelRunner:
    def __init__(self, num_layers):
        self.layers = [DecoderLayer() for _ in range(num_layers)]
        self.kv_caches = []

    def _allocate_kv_cache_tensors(self, blocks):
        for _ in range(blocks):
            self.kv_caches.append(empty(64 * MiB))

    def initialize_kv_cache(self):
        self._allocate_kv_cache_tensors(blocks=8)

    def execute_model(self, steps):
        for _ in range(steps):
            for layer in self.layers:
                out = layer.mlp.forward()
                del out


class EngineCore:
    def __init__(self):
        self.runner = GPUModelRunner(num_layers=4)
        self.runner.initialize_kv_cache()

    def run(self):
        self.runner.execute_model(steps=3)


def main():
    print(f"serving_demo: running on {BACKEND}", file=sys.stderr)
    engine = EngineCore()
    engine.run()
    return engine


if __name__ == "__main__":
    # Kept alive like a server's engine: what it holds is "in use" at exit.
    engine = main()
