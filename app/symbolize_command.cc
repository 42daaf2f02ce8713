#include "app/symbolize_command.h"

#include "absl/strings/str_format.h"
#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_symbolizer.h"
#include "exporters/pprof/pprof_writer.h"
#include "exporters/pprof/stored_profile.h"
#include "logging/log.h"

namespace gpuflame::profiler {
namespace {

int Fail(const std::string& message) {
  logging::Error(message);
  return 2;
}

}  // namespace

int RunSymbolize(const SymbolizeOptions& o) {
  // The profile is held about twice at the peak (parsed, then serialized),
  // so RSS stays under ~600 MiB at stored_profile.h's limits.
  absl::StatusOr<std::string> read = exporters::ReadStoredFile(o.input, "symbolize");
  if (!read.ok()) return Fail(std::string(read.status().message()));
  absl::StatusOr<std::string> inflated = exporters::InflateStoredProfile(std::move(*read), o.input, "symbolize");
  if (!inflated.ok()) return Fail(std::string(inflated.status().message()));
  std::string bytes = std::move(*inflated);
  // Parsed, a profile may take far more than its bytes (stored_profile.h).
  absl::StatusOr<uint64_t> elements = exporters::CountPprofElements(bytes);
  if (!elements.ok()) return Fail(absl::StrFormat("%s: %s", o.input, elements.status().message()));
  if (*elements > exporters::kMaxStoredProfileElements)
    return Fail(absl::StrFormat("%s: more than the %d samples, locations, strings and the like symbolize reads",
                                o.input, exporters::kMaxStoredProfileElements));
  auto report = exporters::SymbolizePprof(bytes, o.binary_dirs);
  if (!report.ok()) return Fail(absl::StrFormat("%s: %s", o.input, report.status().message()));
  auto out = exporters::Gzip(bytes);
  if (!out.ok()) return Fail(absl::StrFormat("%s: %s", o.output, out.status().message()));
  std::string().swap(bytes);
  if (auto s = exporters::WriteFile(o.output, *out); !s.ok()) return Fail(std::string(s.message()));
  logging::Info(absl::StrFormat(
      "%d of %d raw-address frames resolved (%d without a matching binary, %d without a symbol); wrote %s",
      report->resolved, report->unresolved_before, report->no_binary, report->no_symbol, o.output));
  return 0;
}

}  // namespace gpuflame::profiler
