// What names a process's service outside Kubernetes, where there is no
// namespace/container: the systemd service it runs in (its cgroup path, as
// systemd names the cgroup after the unit) and the script it runs (its
// command line: `python3 -u train.py` runs train.py). The executable's name
// alone (comm) makes every PyTorch job `python3`. Read once at discovery and
// again at exec; both files are the target's to shape (cmdline entirely),
// so every read and loop is bounded and the answers are checked text.
// Not thread-safe: the event loop reads; the results are plain values.
#ifndef GPUFLAME_PROFILER_PROCESS_SERVICE_HINTS_H_
#define GPUFLAME_PROFILER_PROCESS_SERVICE_HINTS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace gpuflame::profiler {

struct ServiceHints {
  std::string systemd_service;  // "gpu-train" for gpu-train.service; empty if none
  std::string script;           // "train.py", a `-m` module, or argv[0]'s base name; empty if none
};

// The innermost systemd service in /proc/PID/cgroup's unified (0::) or
// name=systemd hierarchy, without ".service". A user's own manager
// (user@UID.service) and scopes (login sessions, containers) are not
// services of their own: they give nothing.
std::optional<std::string> SystemdServiceFromCgroup(std::string_view cgroup_text);
// What /proc/PID/cmdline (NUL-separated argv) runs: for a Python
// interpreter, the script's base name or the `-m` module (nothing for `-c`
// or stdin); for anything else, argv[0]'s base name. Valid UTF-8 without
// control characters, at most 256 bytes.
std::optional<std::string> ScriptFromCmdline(std::string_view cmdline);

// |proc| is "/proc" except in tests.
ServiceHints ReadServiceHints(pid_t pid, const std::string& proc = "/proc");

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROCESS_SERVICE_HINTS_H_
