#include "base/human_units.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuflame::base {

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  // In double before the sign goes: -INT64_MIN does not exist.
  double v = std::fabs(static_cast<double>(bytes));
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  return absl::StrFormat("%s%.*f %s", bytes < 0 ? "-" : "", u ? 2 : 0, v, units[u]);
}

std::string HumanSeconds(double ns) {
  const char* sign = ns < 0 ? "-" : "";
  ns = std::fabs(ns);
  if (ns >= 1e9) return absl::StrFormat("%s%.2f s", sign, ns / 1e9);
  if (ns >= 1e6) return absl::StrFormat("%s%.1f ms", sign, ns / 1e6);
  return absl::StrFormat("%s%.0f µs", sign, ns / 1e3);
}

std::string HumanCount(uint64_t n) {
  if (n >= 1'000'000) return absl::StrFormat("%.2f M", static_cast<double>(n) / 1e6);
  if (n >= 1'000) return absl::StrFormat("%.1f k", static_cast<double>(n) / 1e3);
  return absl::StrCat(n);
}

std::string HumanValue(int64_t v, std::string_view unit) {
  if (unit == "bytes") return HumanBytes(v);
  if (unit == "nanoseconds") return HumanSeconds(static_cast<double>(v));
  // The magnitude as unsigned: -INT64_MIN does not exist as an int64_t.
  const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string n = absl::StrCat(v < 0 ? "-" : "", HumanCount(magnitude));
  if (unit == "count" || unit.empty()) return n;
  return absl::StrCat(n, " ", std::string(unit));
}

std::string HumanDelta(int64_t v, std::string_view unit) { return absl::StrCat(v > 0 ? "+" : "", HumanValue(v, unit)); }

}  // namespace gpuflame::base
