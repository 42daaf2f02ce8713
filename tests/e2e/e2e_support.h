// Helpers for the end-to-end tests: run the real gpuflame binary on real
// Python processes, then read what it wrote with the pprof schema and with an
// independent reader (`go tool pprof`).
#ifndef GPUFLAME_TESTS_E2E_E2E_SUPPORT_H_
#define GPUFLAME_TESTS_E2E_E2E_SUPPORT_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "profile.pb.h"

namespace gpuflame::e2e {

struct RunResult {
  int status = -1;     // exit status, or 128+signal
  std::string output;  // stdout and stderr
};
RunResult Sh(const std::string& shell_command);  // runs via /bin/sh
// Runs a `gpuflame record -p` command line and creates the file |go| once it
// says it is recording (attached): the workload's signal to go on.
RunResult RecordAttached(const std::string& command, const std::string& go);

struct Interpreter {
  std::string label;  // "3.12" or "3.11-static"
  std::string path;
  int minor = 0;
};
inline void PrintTo(const Interpreter& i, std::ostream* os) { *os << i.label << " (" << i.path << ")"; }
// pyenv CPython 3.10-3.13 (shared libpython) and Debian's static python3.11.
std::vector<Interpreter> SupportedInterpreters();
std::string PyenvPython(const std::string& minor);  // "" when absent

// Environment that points sim_torch at the simulated CUDA runtime (fixture).
std::string SimEnv();
// Environment that has gpuflame load the simulated NVML (fixture) in place of
// the driver's libnvidia-ml.so.1: GPUFLAME_NVML_LIBRARY=...
std::string SimNvmlEnv();

// tests/workloads/steady.py on the simulated runtime, in the background: a
// process already running (holding 6 MiB) when gpuflame attaches. Waits
// for its pid file; -1 if it never came. |args| follow its pid and go files.
pid_t StartSteadyWorkload(const std::string& python, const std::string& pidfile, const std::string& go,
                          const std::string& args = "");
// The device-level frame for what a process found running held before
// gpuflame attached, as the driver counts it (profiler/pipeline/event_processor.h).
inline constexpr const char* kHeldBeforeAttachFrame =
    "[held before gpuflame attached, per the driver (NVML): includes the CUDA context]";
// The number a workload writes to |path| (steady.py's pid file + ".held":
// what the simulated driver holds for it), waited for up to 10 s; -1 if none.
int64_t WaitForNumber(const std::string& path);
// A script under tests/workloads.
std::string Workload(const std::string& name);

std::string TempDir(const std::string& name);
std::string ReadFile(const std::string& path);

bool LoadPprof(const std::string& gz_path, pprof::Profile* out);
// "root;...;leaf" -> value of |sample_type|, trampolines dropped when asked.
// |drop_native| keeps only Python frames and the API leaf (native frames have
// a mapping): what the tests that are about Python stacks compare.
std::map<std::string, int64_t> Stacks(const pprof::Profile& p, const std::string& sample_type,
                                      bool drop_trampolines = true, bool drop_native = false);
int64_t Total(const pprof::Profile& p, const std::string& sample_type);
// One stack per line with its value, for failure messages.
std::string Dump(const std::map<std::string, int64_t>& stacks);
// Line recorded for the first location whose function has |name|.
int64_t LineOf(const pprof::Profile& p, const std::string& name);
// 1-based line of the first line in |file| containing |needle|.
int SourceLine(const std::string& file, const std::string& needle);

}  // namespace gpuflame::e2e

// End-to-end tests need root for BPF. CI sets GPUFLAME_REQUIRE_E2E=1 so that a
// skip there is a failure, never a silent pass.
#define GPUFLAME_REQUIRE_ROOT()                                                   \
  do {                                                                            \
    if (geteuid() != 0) {                                                         \
      if (getenv("GPUFLAME_REQUIRE_E2E")) FAIL() << "end-to-end tests need root"; \
      GTEST_SKIP() << "needs root for eBPF";                                      \
    }                                                                             \
  } while (0)

#endif  // GPUFLAME_TESTS_E2E_E2E_SUPPORT_H_
