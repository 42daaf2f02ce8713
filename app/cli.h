// Command-line parsing for `gpuflame`, kept apart from main() so that every
// mistake a user can make is tested for its one-line message.
#ifndef GPUFLAME_APP_CLI_H_
#define GPUFLAME_APP_CLI_H_

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "app/diff_command.h"
#include "app/record_command.h"
#include "app/symbolize_command.h"
#include "app/timeline_command.h"

namespace gpuflame::profiler {

struct HelpRequest {
  std::string text;
};
struct VersionRequest {};

using Command = std::variant<RecordOptions, AgentConfig, SymbolizeOptions, DiffOptions, TimelineFetchOptions,
                             HelpRequest, VersionRequest>;

// |env| feeds the agent's GPUFLAME_* settings.
absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args,
                                         const std::map<std::string, std::string>& env = {});
std::string UsageText();  // the commands; each has its own help:
std::string RecordUsageText();
std::string SymbolizeUsageText();
std::string DiffUsageText();
std::string TimelineUsageText();

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_CLI_H_
