"""Device memory calls on a real GPU, for the timeline's spans of them
(record --timeline): a loader that allocates four 256 MiB weight tensors
(the caching allocator's cudaMalloc of each segment), training steps that
allocate and drop activations, then the weights dropped and the cache
emptied (cudaFree of every segment: it waits for the device). Each part in
a class method, so the spans' stacks can be checked by name."""
import torch

MiB = 1 << 20
dev = torch.device("cuda")


class Loader:
    def load(self):
        return [torch.empty(256 * MiB, dtype=torch.uint8, device=dev).fill_(1) for _ in range(4)]


class Trainer:
    def step(self):
        x = torch.randn(2048, 2048, device=dev)
        for _ in range(8):
            x = torch.tanh(x @ x)
        return x.sum().item()


class Cleaner:
    def release(self, weights):
        weights.clear()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


weights = Loader().load()
trainer = Trainer()
for _ in range(20):
    trainer.step()
Cleaner().release(weights)
print("done")
