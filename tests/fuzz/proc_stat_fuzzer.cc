// Fuzz target for /proc/PID/stat fields (inspect/proc_stat.cc): the command
// name inside the parentheses is the process's own choice (prctl
// PR_SET_NAME: spaces, ')' and digits included), and fields are counted from
// the last ')'. The input is the stat line; seeds are real ones.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "inspect/proc_stat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view stat(reinterpret_cast<const char*>(data), size);
  const auto ticks = gpuflame::inspect::CpuTicksFromStat(stat);
  const auto state = gpuflame::inspect::StateAndParentFromStat(stat);
  const auto start = gpuflame::inspect::StartTicksFromStat(stat);
  const auto threads = gpuflame::inspect::ThreadsFromStat(stat);
  const auto flags = gpuflame::inspect::FlagsFromStat(stat);
  // All count from the last ')': without one, none answers.
  if (stat.rfind(')') == std::string_view::npos) FUZZ_CHECK(!ticks && !state && !start && !threads && !flags);
  // The CPU fields and the start time come after the state: no state, neither.
  if (ticks) FUZZ_CHECK(state.has_value());
  if (start) FUZZ_CHECK(state.has_value());
  // The thread count lies between the CPU fields and the start time.
  if (threads) FUZZ_CHECK(ticks.has_value());
  // The flags lie between the state and the CPU fields.
  if (flags) FUZZ_CHECK(state.has_value());
  if (ticks) FUZZ_CHECK(flags.has_value());
  if (start) FUZZ_CHECK(threads.has_value());
  return 0;
}
