// Fields of a /proc/PID/stat line. The command name before them may hold
// anything, spaces and parentheses too, so fields are counted from its last
// ')'.
#ifndef GPUFLAME_INSPECT_PROC_STAT_H_
#define GPUFLAME_INSPECT_PROC_STAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuflame::inspect {

// One bounded read of a /proc/.../stat file (1 KiB: a 16-byte name and
// the 50-odd numbers), for the parsers below; nothing if it cannot be read.
// stdio only: the injection library compiles this file in.
std::optional<std::string> ReadStatFile(const char* path);

// CPU time: utime + stime, in clock ticks.
std::optional<uint64_t> CpuTicksFromStat(std::string_view stat);

// The state letter ('R', 'S', 'T' stopped, ...) and the parent's pid.
struct StateAndParent {
  char state;
  int ppid;
};
std::optional<StateAndParent> StateAndParentFromStat(std::string_view stat);

// When the process started, in clock ticks after boot (field 22): with its
// pid, what names one process for good (a pid alone is reused).
std::optional<uint64_t> StartTicksFromStat(std::string_view stat);

// The task's flags (field 9, PF_*): PF_EXITING (0x4) from the moment it
// starts to exit, while its state letter may still say running.
std::optional<uint64_t> FlagsFromStat(std::string_view stat);
inline constexpr uint64_t kPfExiting = 0x4;

// The process's threads (field 20), a zombie leader's included: the
// kernel counts a leader that ended before its other threads until the last
// of them ends.
std::optional<uint64_t> ThreadsFromStat(std::string_view stat);

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_PROC_STAT_H_
