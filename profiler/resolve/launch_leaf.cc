#include "profiler/resolve/launch_leaf.h"

namespace gpuflame::profiler {

bool IsCudaLibrary(std::string_view file) {
  const size_t slash = file.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
  return base.starts_with("libcuda.so") || base.starts_with("libcudart.so");
}

void KeepOutermostCudaFrame(std::vector<symbolizer::Frame>& native) {
  size_t run = 0;
  while (run < native.size() && IsCudaLibrary(native[native.size() - 1 - run].file)) run++;
  if (run > 1) native.resize(native.size() - run + 1);
}

}  // namespace gpuflame::profiler
