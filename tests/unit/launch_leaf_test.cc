// profiler/resolve/launch_leaf.h: the API a workload called stays the leaf
// of a launch's stack, CUDA's own frames above it go, and an unnamed driver
// entry takes the name of the call CUPTI saw.
#include "profiler/resolve/launch_leaf.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bpf/gpuflame_abi.h"
#include "profiler/resolve/cuda_api_name.h"

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

Frame Named(std::string name, std::string file) {
  Frame f = F(name, std::move(file));
  f.system_name = std::move(name);
  return f;
}

// CUPTI's IDs (cuda_api_name_test checks them against CUPTI's headers).
constexpr uint16_t kCuLaunchKernel = 307, kCudaMemcpyAsync = 41, kCudaMemsetAsync = 51;
constexpr uint32_t kDriverLaunch = GF_LAUNCH_API(kCuptiDriverDomain, kCuLaunchKernel);

TEST(LaunchLeafTest, AnUnnamedDriverEntryTakesTheNameOfTheCallCuptiSawIt) {
  // cuDNN's statically linked runtime calls the driver through an entry
  // point libcuda does not export (the H100 host, session 32).
  const std::string cudnn = "/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9";
  std::vector<Frame> s = {Named("cudnn::engine::run", cudnn), F("libcudnn_engines_precompiled.so.9+0x1c2d", cudnn),
                          F("libcuda.so.580.159.04+0x4cb045", kCuda), F("libcuda.so.580.159.04+0x2a11f0", kCuda)};
  KeepOutermostCudaFrame(s);
  NameUnnamedLaunchLeaf(s, kDriverLaunch);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.back().name, "cuLaunchKernel");
  EXPECT_EQ(s.back().system_name, "cuLaunchKernel");
  EXPECT_EQ(s.back().file, kCuda);  // still the driver's frame, at its address
  // The statically linked runtime's memsets reach CUPTI's runtime callback
  // through the same unexported driver entry (the H200 host, session 33).
  std::vector<Frame> memset = {Named("cudnn::engine::run", cudnn), F("libcuda.so.580.159.04+0x4cb045", kCuda)};
  NameUnnamedLaunchLeaf(memset, GF_LAUNCH_API(kCuptiRuntimeDomain, kCudaMemsetAsync));
  EXPECT_EQ(memset.back().name, "cudaMemsetAsync");
  std::vector<Frame> copy = {F("libcudart.so.13+0x41f00", kCudart)};
  NameUnnamedLaunchLeaf(copy, GF_LAUNCH_API(kCuptiRuntimeDomain, kCudaMemcpyAsync));
  EXPECT_EQ(copy.back().name, "cudaMemcpyAsync");
}

TEST(LaunchLeafTest, ALeafStaysAsUnwoundWhereTheCallbackCannotNameIt) {
  const std::vector<Frame> unnamed = {F("libcuda.so.580.159.04+0x4cb045", kCuda)};
  auto named_as = [&](std::vector<Frame> s, uint32_t api) {
    NameUnnamedLaunchLeaf(s, api);
    return s.empty() ? std::string() : s.back().name;
  };
  // A library from before the domain was sent: 0, or a bare callback ID.
  EXPECT_EQ(named_as(unnamed, 0), "libcuda.so.580.159.04+0x4cb045");
  EXPECT_EQ(named_as(unnamed, kCuLaunchKernel), "libcuda.so.580.159.04+0x4cb045");
  // An ID the table does not know.
  EXPECT_EQ(named_as(unnamed, GF_LAUNCH_API(kCuptiDriverDomain, 9999)), "libcuda.so.580.159.04+0x4cb045");
  // A named leaf is what the workload called: cudaLaunchKernel over the driver's callback.
  EXPECT_EQ(named_as({Named("cudaLaunchKernel", kCudart)}, kDriverLaunch), "cudaLaunchKernel");
  // Not CUDA's: a launch whose unwind stopped elsewhere.
  EXPECT_EQ(named_as({F("libfoo.so+0x10", "/opt/libfoo.so")}, kDriverLaunch), "libfoo.so+0x10");
  EXPECT_EQ(named_as({}, kDriverLaunch), "");
}

}  // namespace
}  // namespace gpuflame::profiler
