#include "app/record_output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporters/files/folded_writer.h"
#include "exporters/files/html_writer.h"
#include "exporters/pprof/pprof_writer.h"

namespace gpuflame::profiler {

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes < 0 ? -bytes : bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  return absl::StrFormat("%s%.*f %s", bytes < 0 ? "-" : "", u ? 2 : 0, v, units[u]);
}

absl::Status PrepareOutputDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create output directory ", dir, ": ", ec.message()));
  if (access(dir.c_str(), W_OK) != 0)
    return absl::PermissionDeniedError(absl::StrCat("cannot write to output directory ", dir));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> WriteRecordOutput(
    const std::string& dir, const std::vector<const profiler::Profile*>& profiles,
    const std::string& title, const std::string& summary_json) {
  if (auto s = PrepareOutputDir(dir); !s.ok()) return s;
  std::vector<std::string> written;
  auto put = [&](const std::string& name, std::string_view bytes) -> absl::Status {
    std::string path = absl::StrCat(dir, "/", name);
    if (auto s = exporters::WriteFile(path, bytes); !s.ok()) return s;
    written.push_back(path);
    return absl::OkStatus();
  };
  for (const profiler::Profile* p : profiles) {
    auto gz = exporters::EncodePprofGz(*p);
    if (!gz.ok()) return gz.status();
    if (auto s = put(p->name + ".pb.gz", *gz); !s.ok()) return s;
    for (size_t t = 0; t < p->sample_types.size(); t++) {
      std::string folded = exporters::FoldedStacks(*p, static_cast<int>(t));
      if (auto s = put(absl::StrCat(p->name, ".", p->sample_types[t].type, ".folded"), folded); !s.ok())
        return s;
    }
  }
  if (auto s = put("flamegraph.html", exporters::FlameGraphHtml(profiles, title)); !s.ok()) return s;
  if (auto s = put("summary.json", summary_json); !s.ok()) return s;
  return written;
}

}  // namespace gpuflame::profiler
