#include "app/symbolize_command.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_symbolizer.h"
#include "exporters/pprof/pprof_writer.h"

namespace gpuflame::profiler {

int RunSymbolize(const SymbolizeOptions& o) {
  std::ifstream in(o.input, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "gpuflame: cannot read %s\n", o.input.c_str());
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  bool gzipped = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                 static_cast<unsigned char>(bytes[1]) == 0x8b;
  if (gzipped) {
    auto raw = exporters::Gunzip(bytes);
    if (!raw.ok()) {
      std::fprintf(stderr, "gpuflame: %s: %s\n", o.input.c_str(), std::string(raw.status().message()).c_str());
      return 2;
    }
    bytes = std::move(*raw);
  }
  auto report = exporters::SymbolizePprof(bytes, o.binary_dirs);
  if (!report.ok()) {
    std::fprintf(stderr, "gpuflame: %s: %s\n", o.input.c_str(), std::string(report.status().message()).c_str());
    return 2;
  }
  auto out = exporters::Gzip(bytes);
  if (!out.ok()) return 2;
  if (auto s = exporters::WriteFile(o.output, *out); !s.ok()) {
    std::fprintf(stderr, "gpuflame: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  std::fprintf(stderr,
               "gpuflame: %zu of %zu raw-address frames resolved (%zu without a matching binary, %zu without a "
               "symbol); wrote %s\n",
               report->resolved, report->unresolved_before, report->no_binary, report->no_symbol, o.output.c_str());
  return 0;
}

}  // namespace gpuflame::profiler
