"""Workload: kernel launches on the simulated CUDA runtime and CUPTI (test
fixture), from known methods, so kernel time can be checked exactly:
  Model > forward   20 x gemm  (300 us each, cudaLaunchKernel)  = 6 ms
  Model > forward   20 x relu  (50 us each, cuLaunchKernel)     = 1 ms
  Model > backward  10 x a 3-kernel CUDA graph (100+200+300 us) = 6 ms
  load_batch        4 x 8 MiB host-to-device copies (8 us each)
"""
import sim_torch

GEMM = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE"
RELU = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_4ReluEEEviT0_"
MiB = 1 << 20


class Model:
    def __init__(self):
        self.graph = sim_torch.graph(42, [("attn_fwd", 100), ("attn_bwd", 200), ("ampere_sgemm_128x64_nn", 300)])

    def forward(self):
        for _ in range(20):
            sim_torch.launch(GEMM, 300)
            sim_torch.launch_driver(RELU, 50)

    def backward(self):
        for _ in range(10):
            sim_torch.graph_launch(self.graph)


def load_batch():
    for _ in range(4):
        sim_torch.memcpy_htod(8 * MiB)


m = Model()
load_batch()
m.forward()
m.backward()
