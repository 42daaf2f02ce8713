#include "app/symbolize_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_format.h"
#include "exporters/pprof/gzip.h"
#include "exporters/pprof/pprof_symbolizer.h"
#include "exporters/pprof/pprof_writer.h"

namespace gpuflame::profiler {
namespace {

// What symbolize reads, so that a hostile or mistaken file costs bounded
// memory (a 1 MB gzip holding one 1000 MiB string took 4.1 GB before).
// gpuflame's profiles are far smaller: Pyroscope takes 4 MiB uncompressed,
// and record's whole-run profiles are a few MiB. The profile is held about
// twice at the peak (parsed, then serialized), so RSS stays under ~600 MiB.
// Both limits are in `gpuflame --help`.
constexpr size_t kMaxFileBytes = 256u << 20;     // the file as stored
constexpr size_t kMaxProfileBytes = 256u << 20;  // the profile, inflated

// |path|'s bytes, at most kMaxFileBytes.
absl::StatusOr<std::string> ReadBounded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot read %s", path));
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxFileBytes)
    return absl::ResourceExhaustedError(absl::StrFormat("%s: %d MiB, more than the %d MiB symbolize reads", path,
                                                        st.st_size >> 20, kMaxFileBytes >> 20));
  // Read up to the limit, not by the size stat said: the file may grow, or
  // not be a regular file at all.
  std::string bytes;
  if (st.st_size > 0) bytes.reserve(std::min(static_cast<size_t>(st.st_size), kMaxFileBytes) + 1);
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)).gcount() > 0) {
    const auto n = static_cast<size_t>(in.gcount());
    // Checked before the bytes are kept: the string never grows for bytes
    // past the limit.
    if (bytes.size() + n > kMaxFileBytes)
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: more than the %d MiB symbolize reads", path, kMaxFileBytes >> 20));
    bytes.append(chunk, n);
  }
  if (in.bad()) return absl::DataLossError(absl::StrFormat("cannot read %s", path));
  return bytes;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpuflame: %s\n", message.c_str());
  return 2;
}

}  // namespace

int RunSymbolize(const SymbolizeOptions& o) {
  absl::StatusOr<std::string> read = ReadBounded(o.input);
  if (!read.ok()) return Fail(std::string(read.status().message()));
  std::string bytes = std::move(*read);
  bool gzipped =
      bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b;
  if (gzipped) {
    // The limit is checked while inflating: a gzip bomb stops at it.
    auto raw = exporters::Gunzip(bytes, kMaxProfileBytes);
    if (absl::IsResourceExhausted(raw.status()))
      return Fail(absl::StrFormat("%s: the profile inflates to more than the %d MiB symbolize reads", o.input,
                                  kMaxProfileBytes >> 20));
    if (!raw.ok()) return Fail(absl::StrFormat("%s: %s", o.input, raw.status().message()));
    bytes = std::move(*raw);
  }
  auto report = exporters::SymbolizePprof(bytes, o.binary_dirs);
  if (!report.ok()) return Fail(absl::StrFormat("%s: %s", o.input, report.status().message()));
  auto out = exporters::Gzip(bytes);
  if (!out.ok()) return Fail(absl::StrFormat("%s: %s", o.output, out.status().message()));
  std::string().swap(bytes);
  if (auto s = exporters::WriteFile(o.output, *out); !s.ok()) return Fail(std::string(s.message()));
  std::fprintf(stderr,
               "gpuflame: %zu of %zu raw-address frames resolved (%zu without a matching binary, %zu without a "
               "symbol); wrote %s\n",
               report->resolved, report->unresolved_before, report->no_binary, report->no_symbol, o.output.c_str());
  return 0;
}

}  // namespace gpuflame::profiler
