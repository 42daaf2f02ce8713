// Offline symbolization of a stored pprof: native frames that were kept as
// raw addresses (stripped binaries, files unreadable at capture time) carry
// their mapping's file name, build ID and module-relative address, so they
// can be resolved later against the binaries themselves, matched by build ID.
#ifndef GPUFLAME_EXPORTERS_PPROF_PPROF_SYMBOLIZER_H_
#define GPUFLAME_EXPORTERS_PPROF_PPROF_SYMBOLIZER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuflame::exporters {

struct SymbolizeReport {
  size_t unresolved_before = 0;
  size_t resolved = 0;
  size_t no_binary = 0;   // no file with the mapping's build ID
  size_t no_symbol = 0;   // the binary has no symbol there either
};

// Rewrites |pprof| (uncompressed profile.proto bytes) in place. Binaries are
// looked up by build ID in |binary_dirs| (searched recursively, bounded),
// then at the mapping's own path when its build ID matches.
absl::StatusOr<SymbolizeReport> SymbolizePprof(std::string& pprof, const std::vector<std::string>& binary_dirs);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PPROF_PPROF_SYMBOLIZER_H_
