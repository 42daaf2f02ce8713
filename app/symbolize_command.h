// `gpuflame symbolize IN.pb.gz -o OUT.pb.gz [--binaries DIR ...]`: resolve the
// raw-address frames of a stored profile against binaries found later.
#ifndef GPUFLAME_APP_SYMBOLIZE_COMMAND_H_
#define GPUFLAME_APP_SYMBOLIZE_COMMAND_H_

#include <string>
#include <vector>

namespace gpuflame::profiler {

struct SymbolizeOptions {
  std::string input;
  std::string output;
  std::vector<std::string> binary_dirs;
};

int RunSymbolize(const SymbolizeOptions& options);

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_APP_SYMBOLIZE_COMMAND_H_
