#include "inspect/proc_environ.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"

namespace gpuflame::inspect {

std::optional<std::string_view> FindEnvironmentValue(std::string_view environ, std::string_view name) {
  while (!environ.empty()) {
    const size_t end = environ.find('\0');
    std::string_view entry = environ.substr(0, end);
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=')
      return entry.substr(name.size() + 1);
    if (end == std::string_view::npos) break;
    environ.remove_prefix(end + 1);
  }
  return std::nullopt;
}

std::optional<std::string> EnvironmentValue(pid_t pid, std::string_view name) {
  // A /proc file: reads never block. Bounded all the same.
  base::ScopedFd fd(open(absl::StrCat("/proc/", pid, "/environ").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string buf(kMaxEnvironBytes, '\0');
  size_t got = 0;
  for (int reads = 0; got < buf.size() && reads < 1024; reads++) {
    ssize_t n = read(fd.get(), buf.data() + got, buf.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  auto value = FindEnvironmentValue(std::string_view(buf.data(), got), name);
  if (!value) return std::nullopt;
  return std::string(*value);
}

}  // namespace gpuflame::inspect
