#include "profiler/process/process_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"

namespace gpuflame::profiler {

std::string ProcessStateName(pid_t pid) {
  base::ScopedFd fd(open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "gone";
  char buf[512];
  const ssize_t n = read(fd.get(), buf, sizeof(buf));
  if (n <= 0) return "";
  // "pid (comm) S ...": the command may hold ')' itself, so the last one.
  const std::string_view stat(buf, static_cast<size_t>(n));
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size()) return "";
  switch (stat[close + 2]) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "in uninterruptible wait";
    case 'T': return "stopped";
    case 't': return "stopped by a tracer";
    case 'Z': return "exited";
    default: return "";
  }
}

}  // namespace gpuflame::profiler
