#include "profiler/resolve/launch_leaf.h"

#include "bpf/gpuflame_abi.h"
#include "profiler/resolve/cuda_api_name.h"

namespace gpuflame::profiler {

namespace {

std::string_view BaseName(std::string_view file) {
  const size_t slash = file.rfind('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

bool IsDriver(std::string_view file) { return BaseName(file).starts_with("libcuda.so"); }
bool IsRuntime(std::string_view file) { return BaseName(file).starts_with("libcudart.so"); }

}  // namespace

bool IsCudaLibrary(std::string_view file) { return IsDriver(file) || IsRuntime(file); }

void KeepOutermostCudaFrame(std::vector<symbolizer::Frame>& native) {
  size_t run = 0;
  while (run < native.size() && IsCudaLibrary(native[native.size() - 1 - run].file)) run++;
  if (run > 1) native.resize(native.size() - run + 1);
}

void NameUnnamedLaunchLeaf(std::vector<symbolizer::Frame>& native, uint32_t launch_api) {
  if (native.empty() || !native.back().system_name.empty()) return;
  symbolizer::Frame& leaf = native.back();
  const uint8_t domain = GF_LAUNCH_API_DOMAIN(launch_api);
  const bool library_matches =
      (domain == kCuptiDriverDomain && IsDriver(leaf.file)) || (domain == kCuptiRuntimeDomain && IsRuntime(leaf.file));
  if (!library_matches) return;
  // Only IDs the table knows: "[driver call 123]" would say less than the
  // module and offset it replaces.
  const std::string_view name = KnownCudaApiName(domain, GF_LAUNCH_API_CBID(launch_api));
  if (name.empty()) return;
  leaf.name = name;
  leaf.system_name = name;
}

}  // namespace gpuflame::profiler
