#include "profiler/resolve/launch_leaf.h"

#include "bpf/gpuflame_abi.h"
#include "profiler/resolve/cuda_api_name.h"

namespace gpuflame::profiler {

namespace {

std::string_view BaseName(std::string_view file) {
  const size_t slash = file.rfind('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

}  // namespace

bool IsCudaLibrary(std::string_view file) {
  const std::string_view base = BaseName(file);
  return base.starts_with("libcuda.so") || base.starts_with("libcudart.so");
}

void KeepOutermostCudaFrame(std::vector<symbolizer::Frame>& native) {
  size_t run = 0;
  while (run < native.size() && IsCudaLibrary(native[native.size() - 1 - run].file)) run++;
  if (run > 1) native.resize(native.size() - run + 1);
}

void NameUnnamedLaunchLeaf(std::vector<symbolizer::Frame>& native, uint32_t launch_api) {
  if (native.empty() || !native.back().system_name.empty() || !IsCudaLibrary(native.back().file)) return;
  // Only IDs the table knows: "[driver call 123]" would say less than the
  // module and offset it replaces.
  const std::string_view name = KnownCudaApiName(GF_LAUNCH_API_DOMAIN(launch_api), GF_LAUNCH_API_CBID(launch_api));
  if (name.empty()) return;
  native.back().name = name;
  native.back().system_name = name;
}

}  // namespace gpuflame::profiler
