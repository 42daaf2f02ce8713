// Fuzz target for the agent's YAML configuration (agent/agent_config.cc,
// LoadAgentConfig with --config FILE): a file an operator writes (or a
// Helm value renders), read as root at start. yaml-cpp reports type
// mismatches, alias cycles and syntax errors by throwing; every one of them
// must become a clear error, not an abort of the agent. The input is the
// file; seeds are real configurations (the Helm chart's, the examples').
//
// Checked: an error has a message; a configuration accepted is described
// (DescribeConfig, what --check-config prints).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "fuzz_check.h"
#include "input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = gpuflame::fuzz::InputFile("agent.yaml", data, size);
  const std::map<std::string, std::string> env;
  auto config = gpuflame::profiler::LoadAgentConfig({"--config", path}, env);
  if (!config.ok()) {
    FUZZ_CHECK(!config.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!gpuflame::profiler::DescribeConfig(*config).empty());
  return 0;
}
