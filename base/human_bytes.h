// Byte counts as people read them: "1.50 GiB", "512 B".
#ifndef GPUFLAME_BASE_HUMAN_BYTES_H_
#define GPUFLAME_BASE_HUMAN_BYTES_H_

#include <cstdint>
#include <string>

namespace gpuflame::base {

// Binary units, two decimals past bytes; negative values keep their sign.
std::string HumanBytes(int64_t bytes);

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_HUMAN_BYTES_H_
