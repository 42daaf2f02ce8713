"""Workload: the CUDA runtime and driver allocation APIs other than plain
cudaMalloc, through the simulated CUDA runtime (test fixture)."""
import sim_torch

MiB = 1 << 20


def stream_ordered():
    p = sim_torch.cuda_malloc_async(5 * MiB)  # cudaMallocAsync 5 MiB, freed
    sim_torch.cuda_free_async(p)


def managed():
    return sim_torch.cuda_malloc_managed(7 * MiB)  # cudaMallocManaged 7 MiB, kept


def pitched():
    # 1000 bytes wide rounds to a 1024-byte pitch: 1024 * 2048 = 2 MiB, kept
    return sim_torch.cu_mem_alloc_pitch(1000, 2048)


def oom():
    assert sim_torch.cuda_malloc_fails(1 << 41) != 0  # 2 TiB: fails, nothing counted


stream_ordered()
kept = (managed(), pitched())
oom()
