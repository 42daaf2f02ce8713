#include "profiler/process/python_discovery.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuflame::profiler {

using symbolizer::ElfFile;
using inspect::Mapping;
using inspect::PythonVersion;

std::optional<PythonVersion> VersionFromName(std::string_view name) {
  for (std::string_view prefix : {"libpython", "python"}) {
    if (!std::string_view(name).starts_with(prefix)) continue;
    std::string_view rest = name.substr(prefix.size());
    if (rest.size() < 3 || rest[0] != '3' || rest[1] != '.') return std::nullopt;
    int minor = 0;
    size_t i = 2;
    while (i < rest.size() && i < 5 && rest[i] >= '0' && rest[i] <= '9')
      minor = minor * 10 + (rest[i++] - '0');
    if (i == 2) return std::nullopt;
    return PythonVersion{3, minor, 0};
  }
  return std::nullopt;
}

namespace {

std::string ExePath(pid_t pid) {
  char buf[4096];
  std::string link = absl::StrCat("/proc/", pid, "/exe");
  ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string out(buf, static_cast<size_t>(n));
  constexpr std::string_view kDeleted = " (deleted)";
  if (std::string_view(out).ends_with(kDeleted)) out.resize(out.size() - kDeleted.size());
  return out;
}

// Py_Version (3.11+) is a constant in the file: the exact version, without
// running or even reading the process.
std::optional<PythonVersion> VersionFromElf(const ElfFile& elf) {
  auto sym = elf.FindSymbol("Py_Version");
  if (!sym) return std::nullopt;
  auto bytes = elf.ReadVaddr(*sym, 4);
  if (!bytes) return std::nullopt;
  uint32_t hex = 0;
  std::memcpy(&hex, bytes->data(), 4);
  return PythonVersion{static_cast<int>(hex >> 24), static_cast<int>((hex >> 16) & 0xff),
                       static_cast<int>((hex >> 8) & 0xff)};
}

}  // namespace

absl::StatusOr<std::optional<PythonProcess>> DiscoverPython(pid_t pid,
                                                            const std::vector<Mapping>& maps,
                                                            symbolizer::ElfCache& elves) {
  std::string exe = ExePath(pid);
  // Prefer libpython when both match (a static exe loading libpython is odd).
  const Mapping* candidate = nullptr;
  for (const Mapping& m : maps) {
    if (std::string_view(m.Basename()).starts_with("libpython3")) {
      candidate = &m;
      break;
    }
  }
  if (!candidate) {
    for (const Mapping& m : maps) {
      if (!exe.empty() && m.path == exe) {
        candidate = &m;
        break;
      }
    }
  }
  if (!candidate) return std::nullopt;
  const ElfFile* elf = elves.Get(pid, *candidate);
  if (!elf) return std::nullopt;
  auto runtime = elf->FindSymbol("_PyRuntime");
  if (!runtime) {
    if (std::string_view(candidate->Basename()).starts_with("libpython"))
      return absl::NotFoundError(
          absl::StrCat(candidate->path, " has no _PyRuntime symbol: Python frames unavailable"));
    return std::nullopt;  // an executable that is not Python
  }
  std::optional<PythonVersion> version = VersionFromElf(*elf);
  if (!version) version = VersionFromName(candidate->Basename());
  if (!version && candidate->path == exe) {
    auto slash = exe.rfind('/');
    version = VersionFromName(slash == std::string::npos ? exe : exe.substr(slash + 1));
  }
  if (!version)
    return absl::NotFoundError(absl::StrCat("cannot tell the Python version of ", candidate->path));
  auto layout = inspect::LayoutFor(*version);
  if (!layout)
    return absl::UnimplementedError(absl::StrCat(
        "Python ", version->major, ".", version->minor,
        " is not supported (3.10-3.13): profiles will have native frames only"));
  auto bias = elf->LoadBias(candidate->start, candidate->offset);
  if (!bias) return absl::InternalError(absl::StrCat("cannot compute the load bias of ", candidate->path));

  PythonProcess out;
  out.layout = *layout;
  out.mapping = candidate;
  out.elf_path = inspect::OpenablePath(pid, *candidate);
  out.bpf = inspect::MakePyProc(*layout, *bias + *runtime);
  if (auto fin = elf->FindSymbol("Py_FinalizeEx")) out.finalize_offset = elf->VaddrToOffset(*fin);
  return std::optional<PythonProcess>(std::move(out));
}

}  // namespace gpuflame::profiler
