#ifndef GPUFLAME_SYMBOLIZER_DEMANGLE_H_
#define GPUFLAME_SYMBOLIZER_DEMANGLE_H_

#include <string>
#include <string_view>

namespace gpuflame::symbolizer {

// C++ names demangled (`_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE`
// -> `c10::reportMemoryUsageToProfiler(void*, long, unsigned long, unsigned long, c10::Device)`);
// anything else returned unchanged.
std::string Demangle(std::string_view name);

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_DEMANGLE_H_
