#include "app/record_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/human_units.h"
#include "base/json_string.h"
#include "base/scoped_fd.h"
#include "exporters/files/folded_writer.h"
#include "exporters/files/html_writer.h"
#include "exporters/pprof/pprof_writer.h"

namespace gpuflame::profiler {

std::string SelfCostJson(const SelfCost& cost) {
  const ProgramCost total = TotalCost(cost.programs);
  std::string out = absl::StrCat(
      "{\"bpf_stats\": ", base::JsonString(cost.bpf_stats), ", \"bpf_hits\": ", total.hits,
      ", \"bpf_ns_total\": ", total.ns_total, ", \"bpf_ns_per_hit\": ", absl::StrFormat("%.1f", total.ns_per_hit()),
      ", \"bpf_ns_machine_wide\": ", MachineWideCost(cost.programs).ns_total,
      ", \"gpuflame_cpu_seconds\": ", cost.cpu_seconds < 0 ? "null" : absl::StrFormat("%.3f", cost.cpu_seconds),
      ", \"programs\": {");
  for (size_t i = 0; i < cost.programs.size(); i++) {
    const ProgramCost& p = cost.programs[i];
    absl::StrAppend(&out, i ? ",\n" : "\n", "    ", base::JsonString(p.name), ": {\"hits\": ", p.hits,
                    ", \"ns_total\": ", p.ns_total, ", \"ns_per_hit\": ", absl::StrFormat("%.1f", p.ns_per_hit()),
                    ", \"machine_wide\": ", p.machine_wide ? "true" : "false", "}");
  }
  absl::StrAppend(&out, cost.programs.empty() ? "}" : "\n  }");
  const LibraryCost& l = cost.library;
  absl::StrAppend(
      &out, ",\n  \"library\": {\"processes\": ", l.processes, ", \"ns_total\": ", l.ns(),
      ", \"tensor_events\": ", l.hook_calls, ", \"tensor_hook_ns\": ", l.hook_ns, ", \"tensor_hook_ns_per_event\": ",
      absl::StrFormat("%.1f", l.hook_calls ? static_cast<double>(l.hook_ns) / static_cast<double>(l.hook_calls) : 0.0),
      ", \"cupti_callback_ns\": ", l.callback_ns, ", \"library_threads_ns\": ", l.thread_ns,
      ", \"cupti_overhead_records_ns\": ", l.cupti_overhead_ns, "}}");
  return out;
}

std::string SelfCostLine(const SelfCost& cost) {
  const ProgramCost total = TotalCost(cost.programs);
  std::string bpf = cost.bpf_stats != "on" ? absl::StrCat("BPF run time ", cost.bpf_stats)
                    : total.hits == 0      ? std::string("no BPF program ran")
                                           : absl::StrFormat("%s in BPF programs (%.2f µs per hit, %s hits)",
                                                             base::HumanSeconds(static_cast<double>(total.ns_total)),
                                                             total.ns_per_hit() / 1e3, base::HumanCount(total.hits));
  if (const ProgramCost node = MachineWideCost(cost.programs); node.ns_total && cost.bpf_stats == "on")
    absl::StrAppend(&bpf, ", of which ", base::HumanSeconds(static_cast<double>(node.ns_total)),
                    " machine-wide (process lifecycle on every process of the node)");
  const LibraryCost& l = cost.library;
  if (l.processes)
    absl::StrAppend(&bpf, ", ", base::HumanSeconds(static_cast<double>(l.ns())), " in the workloads' library",
                    l.hook_calls
                        ? absl::StrFormat(" (%.2f µs per tensor event)",
                                          static_cast<double>(l.hook_ns) / static_cast<double>(l.hook_calls) / 1e3)
                        : std::string());
  if (cost.cpu_seconds >= 0) absl::StrAppend(&bpf, absl::StrFormat(", %.2f s CPU in gpuflame", cost.cpu_seconds));
  return absl::StrCat("gpuflame cost: ", bpf);
}

absl::Status PrepareOutputDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create output directory ", dir, ": ", ec.message()));
  if (access(dir.c_str(), W_OK) != 0)
    return absl::PermissionDeniedError(absl::StrCat("cannot write to output directory ", dir));
  return absl::OkStatus();
}

namespace {

// At most this many names, of at most 255 bytes each: ours are a few dozen.
constexpr size_t kMaxManifestBytes = 64 << 10;

// A name this directory's manifest may list: one plain file name, never a
// path (the manifest is a file anyone with write access could edit).
bool PlainName(absl::string_view name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == absl::string_view::npos && name.find('\0') == absl::string_view::npos &&
         name != kOutputManifest;
}

}  // namespace

std::vector<std::string> RemoveStaleOutputs(const std::string& dir) {
  std::vector<std::string> removed;
  base::ScopedFd dfd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd) return removed;
  base::ScopedFd mfd(openat(dfd.get(), kOutputManifest, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (!mfd || fstat(mfd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return removed;
  std::string text(kMaxManifestBytes, '\0');
  const ssize_t n = read(mfd.get(), text.data(), text.size());
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  for (absl::string_view name : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (!PlainName(name)) continue;
    const std::string file(name);
    // Only regular files (a symbolic link is removed, not followed).
    if (fstatat(dfd.get(), file.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) continue;
    if (unlinkat(dfd.get(), file.c_str(), 0) == 0) removed.push_back(file);
  }
  unlinkat(dfd.get(), kOutputManifest, 0);
  return removed;
}

absl::StatusOr<std::vector<std::string>> WriteRecordOutput(
    const std::string& dir, const std::vector<const profiler::Profile*>& profiles, const std::string& title,
    const std::string& summary_json, const std::vector<std::string>& notes,
    const std::vector<exporters::GrowthRow>& growth, const std::vector<std::pair<std::string, std::string>>& files,
    const std::string& utilization_json) {
  if (auto s = PrepareOutputDir(dir); !s.ok()) return s;
  // An earlier run's files that this one does not write again (a profile
  // type it had, a sample type's folded stacks) would read as this run's.
  RemoveStaleOutputs(dir);
  std::vector<std::string> written;
  std::string manifest;
  auto put = [&](const std::string& name, std::string_view bytes) -> absl::Status {
    std::string path = absl::StrCat(dir, "/", name);
    // Listed before it is written: a file half-written when we fail is
    // still ours to remove next time.
    absl::StrAppend(&manifest, name, "\n");
    if (auto s = exporters::WriteFile(absl::StrCat(dir, "/", kOutputManifest), manifest); !s.ok()) return s;
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
      if (auto s = put(absl::StrCat(p->name, ".", p->sample_types[t].type, ".folded"), folded); !s.ok()) return s;
    }
  }
  if (auto s = put("flamegraph.html", exporters::FlameGraphHtml(profiles, title, notes, growth, utilization_json));
      !s.ok())
    return s;
  for (const auto& [name, bytes] : files)
    if (auto s = put(name, bytes); !s.ok()) return s;
  if (auto s = put("summary.json", summary_json); !s.ok()) return s;
  return written;
}

}  // namespace gpuflame::profiler
