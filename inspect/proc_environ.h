// A target's environment (/proc/PID/environ), which it controls: read with
// a size bound and searched without assumptions about its shape.
#ifndef GPUFLAME_INSPECT_PROC_ENVIRON_H_
#define GPUFLAME_INSPECT_PROC_ENVIRON_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace gpuflame::inspect {

// At most this much of an environment is read; a variable past it is not seen.
inline constexpr size_t kMaxEnvironBytes = 256 << 10;

// The value of |name| in NUL-separated NAME=VALUE entries (the last one may
// lack its NUL); the first entry wins, as getenv's does.
std::optional<std::string_view> FindEnvironmentValue(std::string_view environ, std::string_view name);

// The same in a live process; nullopt if unset or unreadable.
std::optional<std::string> EnvironmentValue(pid_t pid, std::string_view name);

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_PROC_ENVIRON_H_
