"""PyTorch's copies and memsets, each kind many times, for the question of
which calls' correlation IDs their activity records carry and whether they
pass through libcuda's exported entry points (run_copy_correlation.sh):
host to device from pinned and pageable memory, device to host (a tensor,
an item), device to device, and the caching allocator's and NCCL-free
memsets PyTorch makes (torch.cuda.memset_... are not public: zero_ on a
byte tensor is a fill kernel, so memsets come only where PyTorch chose them).
Prints each kind's count."""
import sys

import torch

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
n = 1 << 18
pinned = torch.randn(n).pin_memory()
pageable = torch.randn(n)
dev = torch.randn(n, device="cuda")
other = torch.empty_like(dev)
for _ in range(rounds):
    a = pinned.to("cuda", non_blocking=True)  # cudaMemcpyAsync H2D, pinned
    b = pageable.to("cuda")                    # H2D, pageable
    c = dev.cpu()                              # D2H
    other.copy_(dev)                           # D2D, same dtype and layout
    s = dev[:16].sum().item()                  # D2H of one value
torch.cuda.synchronize()
print(f"copy_workload: {rounds} rounds of 5 copies: {5 * rounds}")
