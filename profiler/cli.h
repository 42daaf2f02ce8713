// Command-line parsing for `gpuflame`, kept apart from main() so that every
// mistake a user can make is tested for its one-line message.
#ifndef GPUFLAME_PROFILER_CLI_H_
#define GPUFLAME_PROFILER_CLI_H_

#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/record_command.h"

namespace gpuflame::profiler {

struct HelpRequest {
  std::string text;
};
struct VersionRequest {};

using Command = std::variant<RecordOptions, HelpRequest, VersionRequest>;

absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args);
std::string UsageText();

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_CLI_H_
