#include "base/human_bytes.h"

#include "absl/strings/str_format.h"

namespace gpuflame::base {

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes < 0 ? -bytes : bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  return absl::StrFormat("%s%.*f %s", bytes < 0 ? "-" : "", u ? 2 : 0, v, units[u]);
}

}  // namespace gpuflame::base
