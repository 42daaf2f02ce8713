// Strings from profiled processes (symbol names, Python names read from
// memory, thread names, kernel names) are bytes, not text: pprof's string
// table and JSON must be valid UTF-8, so invalid sequences become U+FFFD.
// Hand-written (a few lines) because neither Abseil nor the C++ standard
// library offers a validating repair.
#ifndef GPUFLAME_BASE_UTF8_H_
#define GPUFLAME_BASE_UTF8_H_

#include <string>
#include <string_view>

namespace gpuflame::base {

bool IsValidUtf8(std::string_view s);
// |s| itself when valid; otherwise each invalid byte replaced by U+FFFD.
std::string ValidUtf8(std::string_view s);

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_UTF8_H_
