#include "inspect/proc_stat.h"

#include <cstdio>
#include <memory>
#include <string>

namespace gpuflame::inspect {
namespace {

// What follows the command name (its last ')'): the state, then the other
// fields, NUL-terminated for sscanf. Nothing without a ')'.
std::optional<std::string> AfterName(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  return std::string(stat.substr(close + 1));
}

}  // namespace

std::optional<std::string> ReadStatFile(const char* path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path, "re"), std::fclose);
  if (!f) return std::nullopt;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf), f.get());
  if (n == 0) return std::nullopt;
  return std::string(buf, n);
}

std::optional<uint64_t> CpuTicksFromStat(std::string_view stat) {
  const auto rest = AfterName(stat);
  if (!rest) return std::nullopt;
  // utime and stime are fields 14 and 15: eleven fields after the state.
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(rest->c_str(), " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return std::nullopt;
  return utime + stime;
}

std::optional<StateAndParent> StateAndParentFromStat(std::string_view stat) {
  const auto rest = AfterName(stat);
  if (!rest) return std::nullopt;
  char state = 0;
  int ppid = 0;
  if (std::sscanf(rest->c_str(), " %c %d", &state, &ppid) != 2) return std::nullopt;
  return StateAndParent{state, ppid};
}

std::optional<uint64_t> StartTicksFromStat(std::string_view stat) {
  const auto rest = AfterName(stat);
  if (!rest) return std::nullopt;
  // starttime is field 22: eighteen fields after the state.
  unsigned long long start = 0;
  if (std::sscanf(rest->c_str(), " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  &start) != 1)
    return std::nullopt;
  return start;
}

std::optional<uint64_t> FlagsFromStat(std::string_view stat) {
  const auto rest = AfterName(stat);
  if (!rest) return std::nullopt;
  unsigned long long flags = 0;
  if (std::sscanf(rest->c_str(), " %*c %*d %*d %*d %*d %*d %llu", &flags) != 1) return std::nullopt;
  return flags;
}

std::optional<uint64_t> ThreadsFromStat(std::string_view stat) {
  const auto rest = AfterName(stat);
  if (!rest) return std::nullopt;
  // num_threads is field 20: sixteen fields after the state.
  unsigned long long threads = 0;
  if (std::sscanf(rest->c_str(), " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %llu",
                  &threads) != 1)
    return std::nullopt;
  return threads;
}

}  // namespace gpuflame::inspect
