// `gpuflame diff BASE NEW -o DIR`: what changed between two profiles (two
// runs, two record directories, two spooled windows): DIR gets the pprof of
// each difference, as `go tool pprof -diff_base` shows it, and one HTML diff
// flame graph; the terminal gets the totals and the stacks that changed most.
#ifndef GPUFLAME_APP_DIFF_COMMAND_H_
#define GPUFLAME_APP_DIFF_COMMAND_H_

#include <string>

namespace gpuflame::profiler {

struct DiffOptions {
  std::string base;
  std::string neu;
  std::string output;
  bool quiet = false;  // no summary on stdout
};

// 0 when at least one pair of profiles was diffed and written; 2, with one
// line on stderr, when none could be.
int RunDiff(const DiffOptions& options);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_DIFF_COMMAND_H_
