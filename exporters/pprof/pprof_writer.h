// Profile -> pprof (profile.proto), following the format's rules: string
// table starts with "", ids are non-zero, sample locations are leaf first,
// only referenced entities are emitted.
#ifndef GPUFLAME_EXPORTERS_PPROF_PPROF_WRITER_H_
#define GPUFLAME_EXPORTERS_PPROF_PPROF_WRITER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiler/aggregate/profile.h"

namespace gpuflame::exporters {

// Serialized, uncompressed profile.proto bytes.
std::string SerializePprof(const profiler::Profile& profile);
// gzip-compressed pprof, as `go tool pprof` and Pyroscope read it.
absl::StatusOr<std::string> EncodePprofGz(const profiler::Profile& profile);
absl::Status WriteFile(const std::string& path, std::string_view bytes);

}  // namespace gpuflame::exporters

#endif  // GPUFLAME_EXPORTERS_PPROF_PPROF_WRITER_H_
