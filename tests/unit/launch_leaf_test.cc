// profiler/resolve/launch_leaf.h: the API a workload called stays the leaf
// of a launch's stack, CUDA's own frames above it go.
#include "profiler/resolve/launch_leaf.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuflame::profiler {
namespace {

using symbolizer::Frame;

Frame F(std::string name, std::string file) {
  Frame f;
  f.name = std::move(name);
  f.file = std::move(file);
  return f;
}

std::vector<std::string> Names(const std::vector<Frame>& frames) {
  std::vector<std::string> out;
  for (const Frame& f : frames) out.push_back(f.name);
  return out;
}

constexpr const char* kCuda = "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04";
constexpr const char* kCudart = "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13";

TEST(LaunchLeafTest, TheRuntimesLaunchIsTheLeafNotTheDriversFramesUnderIt) {
  std::vector<Frame> s = {F("at::native::gpu_kernel", "/torch/lib/libtorch_cuda.so"), F("cudaLaunchKernel", kCudart),
                          F("libcudart.so.13+0x5b2c1", kCudart), F("cuLaunchKernel", kCuda),
                          F("libcuda.so.580.159.04+0x2a11f0", kCuda)};
  KeepOutermostCudaFrame(s);
  EXPECT_EQ(Names(s), (std::vector<std::string>{"at::native::gpu_kernel", "cudaLaunchKernel"}));
}

TEST(LaunchLeafTest, ADriverLaunchFromOutsideCudaKeepsItsName) {
  // cuBLAS on Hopper, Triton, NCCL: the driver's entry called directly.
  std::vector<Frame> s = {F("cublasLtMatmul", "/nvidia/cublas/lib/libcublasLt.so.13"),
                          F("libcublasLt.so.13+0x32c9090", "/nvidia/cublas/lib/libcublasLt.so.13"),
                          F("cuLaunchKernelEx", kCuda), F("libcuda.so.580.159.04+0x2a11f0", kCuda)};
  KeepOutermostCudaFrame(s);
  EXPECT_EQ(Names(s).back(), "cuLaunchKernelEx");
  EXPECT_EQ(s.size(), 3u);
}

TEST(LaunchLeafTest, EdgesAndLookalikes) {
  std::vector<Frame> none;
  KeepOutermostCudaFrame(none);
  EXPECT_TRUE(none.empty());
  std::vector<Frame> one = {F("cuLaunchKernel", kCuda)};
  KeepOutermostCudaFrame(one);
  EXPECT_EQ(Names(one), (std::vector<std::string>{"cuLaunchKernel"}));
  // Nothing but CUDA (an unwind that stopped inside it): its outermost.
  std::vector<Frame> all = {F("a", kCuda), F("b", kCudart), F("c", kCuda)};
  KeepOutermostCudaFrame(all);
  EXPECT_EQ(Names(all), (std::vector<std::string>{"a"}));
  // cuDNN, cuBLAS and a folder named like the driver are not CUDA's runtime or driver.
  EXPECT_FALSE(IsCudaLibrary("/nvidia/cudnn/lib/libcudnn.so.9"));
  EXPECT_FALSE(IsCudaLibrary("/libcuda.so.1/libtorch_cuda.so"));
  EXPECT_FALSE(IsCudaLibrary("/opt/libcuda_stub.so"));
  EXPECT_TRUE(IsCudaLibrary("libcuda.so.1"));
  EXPECT_TRUE(IsCudaLibrary(kCudart));
  std::vector<Frame> cudnn = {F("x", "/nvidia/cudnn/lib/libcudnn.so.9"), F("y", "/nvidia/cudnn/lib/libcudnn.so.9")};
  KeepOutermostCudaFrame(cudnn);
  EXPECT_EQ(cudnn.size(), 2u);
}

}  // namespace
}  // namespace gpuflame::profiler
