// What the fuzz targets share: a check that fails like a crash (libFuzzer
// and fuzz_main.cc both keep the input that tripped it), and a splitter for
// inputs made of several parts.
#ifndef GPUFLAME_TESTS_FUZZ_FUZZ_CHECK_H_
#define GPUFLAME_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string_view>

// A property every answer of the parser must have, whatever the input: its
// failure is a bug like a crash, so it aborts (not an assert: it stays on in
// release builds, where the fuzzers run).
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace gpuflame::fuzz {

// The next part of |in| up to |sep| (or all of it), removed from |in|.
inline std::string_view TakePart(std::string_view& in, char sep) {
  const size_t at = in.find(sep);
  std::string_view part = in.substr(0, at);
  in.remove_prefix(at == std::string_view::npos ? in.size() : at + 1);
  return part;
}

}  // namespace gpuflame::fuzz

#endif  // GPUFLAME_TESTS_FUZZ_FUZZ_CHECK_H_
