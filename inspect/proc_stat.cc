#include "inspect/proc_stat.h"

#include <cstdio>
#include <string>

namespace gpuflame::inspect {

std::optional<uint64_t> CpuTicksFromStat(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // utime and stime are fields 14 and 15: eleven fields after the state.
  const std::string rest(stat.substr(close + 1));
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(rest.c_str(), " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return std::nullopt;
  return utime + stime;
}

std::optional<StateAndParent> StateAndParentFromStat(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  const std::string rest(stat.substr(close + 1));
  char state = 0;
  int ppid = 0;
  if (std::sscanf(rest.c_str(), " %c %d", &state, &ppid) != 2) return std::nullopt;
  return StateAndParent{state, ppid};
}

std::optional<uint64_t> StartTicksFromStat(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // starttime is field 22: eighteen fields after the state.
  const std::string rest(stat.substr(close + 1));
  unsigned long long start = 0;
  if (std::sscanf(rest.c_str(), " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  &start) != 1)
    return std::nullopt;
  return start;
}

std::optional<uint64_t> FlagsFromStat(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  const std::string rest(stat.substr(close + 1));
  unsigned long long flags = 0;
  if (std::sscanf(rest.c_str(), " %*c %*d %*d %*d %*d %*d %llu", &flags) != 1) return std::nullopt;
  return flags;
}

std::optional<uint64_t> ThreadsFromStat(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // num_threads is field 20: sixteen fields after the state.
  const std::string rest(stat.substr(close + 1));
  unsigned long long threads = 0;
  if (std::sscanf(rest.c_str(), " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %llu",
                  &threads) != 1)
    return std::nullopt;
  return threads;
}

}  // namespace gpuflame::inspect
