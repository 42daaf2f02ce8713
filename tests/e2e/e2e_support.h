// Helpers for the end-to-end tests: run the real gpuflame binary on real
// Python processes, then read what it wrote with the pprof schema and with an
// independent reader (`go tool pprof`).
#ifndef GPUFLAME_TESTS_E2E_E2E_SUPPORT_H_
#define GPUFLAME_TESTS_E2E_E2E_SUPPORT_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "base/scoped_fd.h"
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
  std::string path;   // "" when not installed here
  int minor = 0;
};
inline void PrintTo(const Interpreter& i, std::ostream* os) {
  *os << i.label << " (" << (i.path.empty() ? "not installed" : i.path) << ")";
}
// What the kernel logs about uprobes on one file from now on: its
// "ref_ctr ... failed for inode: 0x..." lines, which come just before it
// says it leaks a uprobe it could not remove. Read from /dev/kmsg (root).
class KernelLogOf {
 public:
  explicit KernelLogOf(const std::string& path);
  // The lines naming the file's inode since construction (or the last call).
  std::vector<std::string> NewLines();
  // Whether the log could be read at all (else NewLines says nothing).
  bool readable() const { return fd_ && !inode_hex_.empty(); }

 private:
  base::ScopedFd fd_;
  std::string inode_hex_;
};

// Every interpreter the tests cover, installed or not (a test of one that
// is missing is skipped by InterpreterTest, never dropped from the list):
// pyenv CPython 3.10-3.13 (shared libpython) and Debian's static python3.11.
std::vector<Interpreter> SupportedInterpreters();
std::string PyenvPython(const std::string& minor);  // "" when absent
// Why a test cannot run here: "" when |minor|'s pyenv CPython (or |i|) is
// installed, else which one is missing, where it was looked for, and how
// to get it.
std::string MissingPython(const std::string& minor);
std::string MissingInterpreter(const Interpreter& i);
// "" in a build with kernel time, else why not (cupti/CMakeLists.txt).
std::string MissingKernelTime();

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

// A test that needs something a fresh machine may lack (one of pyenv's
// CPythons, CUPTI's headers at build time) is skipped with |why_missing| ("" when it is there); under
// GPUFLAME_REQUIRE_E2E (CI) it fails instead.
#define GPUFLAME_REQUIRE(why_missing)                        \
  do {                                                       \
    const std::string gf_why_missing = (why_missing);        \
    if (!gf_why_missing.empty()) {                           \
      if (getenv("GPUFLAME_REQUIRE_E2E")) FAIL() << gf_why_missing; \
      GTEST_SKIP() << gf_why_missing;                        \
    }                                                        \
  } while (0)
#define GPUFLAME_REQUIRE_PYTHON(minor) GPUFLAME_REQUIRE(::gpuflame::e2e::MissingPython(minor))
#define GPUFLAME_REQUIRE_KERNEL_TIME() GPUFLAME_REQUIRE(::gpuflame::e2e::MissingKernelTime())

namespace gpuflame::e2e {
// A test over every interpreter, instantiated with
// ::testing::ValuesIn(SupportedInterpreters()): skipped where its
// interpreter is not installed (GPUFLAME_REQUIRE).
class InterpreterTest : public ::testing::TestWithParam<Interpreter> {
 protected:
  void SetUp() override { GPUFLAME_REQUIRE(MissingInterpreter(GetParam())); }
};
}  // namespace gpuflame::e2e

#endif  // GPUFLAME_TESTS_E2E_E2E_SUPPORT_H_
