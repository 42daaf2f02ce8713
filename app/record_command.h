// `gpuflame record`: profile a command, some PIDs, or every CUDA process on
// the machine, then write the profiles as files plus an HTML flame graph.
#ifndef GPUFLAME_APP_RECORD_COMMAND_H_
#define GPUFLAME_APP_RECORD_COMMAND_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpuflame::profiler {

struct RecordOptions {
  std::string output_dir;
  std::optional<double> duration_s;
  std::vector<pid_t> pids;
  std::vector<std::string> command;  // after `--`
  bool show_trampolines = true;
  bool keep_interpreter_frames = false;  // CPython's C frames in mixed stacks
  std::vector<std::string> binary_dirs = {"/usr/lib/debug"};  // --binaries
  int native_stacks = 1;                 // 0 off, 1 device-level events, 2 every allocation
  int cpu_hz = 97;                       // --cpu-hz; 0: no CPU profile
  bool thread_names = false;             // --thread-names
  bool kernel_time = true;               // --no-kernel-time: no CUPTI injection
  bool progress = true;  // only drawn on a terminal
  bool quiet = false;
};

// Returns the process exit status: the command's own when one was run.
int RunRecord(const RecordOptions& options);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_RECORD_COMMAND_H_
