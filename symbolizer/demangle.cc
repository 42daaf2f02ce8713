#include "symbolizer/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace gpuflame::symbolizer {

std::string Demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  std::string mangled(name);
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

}  // namespace gpuflame::symbolizer
