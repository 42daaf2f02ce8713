// Fuzz target for the service-name hints (profiler/process/service_hints.cc):
// /proc/PID/cgroup, whose paths systemd, container runtimes and anyone who
// may create cgroups shape, and /proc/PID/cmdline, which is the target's
// own memory (setproctitle() writes anything there).
//
// Input: CGROUP '\0' CMDLINE (itself NUL-separated). Seeds: real cgroup
// files (systemd services, user managers, sessions, containers, pods) and
// command lines (Python scripts, modules, options, console scripts, retitled
// processes). Checked: every answer is a label value Pyroscope accepts
// (valid UTF-8, no control characters, bounded) and a service is a unit name.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"
#include "fuzz_check.h"
#include "profiler/process/service_hints.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuflame::profiler;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view cgroup = gpuflame::fuzz::TakePart(in, '\0');
  const std::string_view cmdline = in;

  if (auto unit = SystemdServiceFromCgroup(cgroup)) {
    FUZZ_CHECK(!unit->empty() && unit->size() <= 256);
    FUZZ_CHECK(unit->find_first_of("/ \n\r\t") == std::string::npos);
    FUZZ_CHECK(!unit->starts_with("user@"));
  }
  if (auto script = ScriptFromCmdline(cmdline)) {
    FUZZ_CHECK(!script->empty() && script->size() <= 3 * 256);  // 256 bytes, each at worst U+FFFD
    FUZZ_CHECK(gpuflame::base::IsValidUtf8(*script));
    for (char c : *script) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
  return 0;
}
