// Values as a person reads them in a terminal: "1.50 GiB", "12.3 ms",
// "1.46 M". Shared by record's progress and cost lines and diff's summary.
#ifndef GPUFLAME_BASE_HUMAN_UNITS_H_
#define GPUFLAME_BASE_HUMAN_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuflame::base {

// "1.50 GiB", "-512 B"
std::string HumanBytes(int64_t bytes);
// "1.23 s", "-12.3 ms", "420 µs"
std::string HumanSeconds(double ns);
// "1.46 M", "12.3 k", "512"
std::string HumanCount(uint64_t n);
// A pprof value in its unit: bytes and nanoseconds as above, "count" as a
// count, anything else as the number and the unit ("12 samples").
std::string HumanValue(int64_t v, std::string_view unit);
// The same with a sign for growth: "+512.00 MiB", "-3", "0 B".
std::string HumanDelta(int64_t v, std::string_view unit);

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_HUMAN_UNITS_H_
