// gpuflame's entry point: parse, dispatch, and the only place that exits.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "agent/agent_command.h"
#include "app/cli.h"
#include "app/record_command.h"
#include "base/open_file_limit.h"
#include "logging/log.h"
#include "profiler/process/run_control.h"

#ifndef GPUFLAME_VERSION
#define GPUFLAME_VERSION "0.1.0"
#endif

extern char** environ;

int main(int argc, char** argv) {
  gpuflame::profiler::InstallCrashHandler();
  gpuflame::base::RaiseOpenFileLimit();  // before any thread: see its header
  std::vector<std::string> args(argv + 1, argv + argc);
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; e++) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto cmd = gpuflame::profiler::ParseCommandLine(args, env);
  if (!cmd.ok()) {
    gpuflame::logging::Error(cmd.status().message());
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
  if (auto* agent = std::get_if<gpuflame::profiler::AgentConfig>(&*cmd)) {
    if (agent->check_only) {
      std::fputs(gpuflame::profiler::DescribeConfig(*agent).c_str(), stdout);
      std::puts("configuration OK");
      return 0;
    }
    return gpuflame::profiler::RunAgent(*agent);
  }
  if (auto* sym = std::get_if<gpuflame::profiler::SymbolizeOptions>(&*cmd))
    return gpuflame::profiler::RunSymbolize(*sym);
  if (auto* diff = std::get_if<gpuflame::profiler::DiffOptions>(&*cmd)) return gpuflame::profiler::RunDiff(*diff);
  if (auto* timeline = std::get_if<gpuflame::profiler::TimelineFetchOptions>(&*cmd))
    return gpuflame::profiler::RunTimelineFetch(*timeline);
  return gpuflame::profiler::RunRecord(std::get<gpuflame::profiler::RecordOptions>(*cmd));
}
