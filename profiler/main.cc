// gpuflame's entry point: parse, dispatch, and the only place that exits.
#include <cstdio>
#include <string>
#include <vector>

#include "profiler/cli.h"
#include "profiler/record_command.h"

#ifndef GPUFLAME_VERSION
#define GPUFLAME_VERSION "0.1.0"
#endif

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto cmd = gpuflame::profiler::ParseCommandLine(args);
  if (!cmd.ok()) {
    std::fprintf(stderr, "gpuflame: %s\n", std::string(cmd.status().message()).c_str());
    return 2;
  }
  if (auto* help = std::get_if<gpuflame::profiler::HelpRequest>(&*cmd)) {
    std::fputs(help->text.c_str(), stdout);
    return 0;
  }
  if (std::holds_alternative<gpuflame::profiler::VersionRequest>(*cmd)) {
    std::printf("gpuflame %s\n", GPUFLAME_VERSION);
    return 0;
  }
  return gpuflame::profiler::RunRecord(std::get<gpuflame::profiler::RecordOptions>(*cmd));
}
