#include "profiler/process/service_hints.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>

#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"
#include "base/utf8.h"

namespace gpuflame::profiler {
namespace {

constexpr size_t kMaxName = 256;
constexpr int kMaxArgs = 64;   // a script comes within the interpreter's first options
constexpr int kMaxLines = 64;  // cgroup v1 has one line per hierarchy, a dozen or so

// A /proc file, bounded in size. Reading cmdline copies it from the
// target's memory under its memory-map lock, as /proc/PID/maps does (the
// README's limits say so): once at discovery and once per exec.
std::string ReadProcFile(const std::string& path, size_t limit) {
  base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  std::string out(limit, '\0');
  size_t got = 0;
  for (int reads = 0; got < limit && reads < 64; reads++) {
    ssize_t n = read(fd.get(), out.data() + got, limit - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string_view BaseName(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// A label value from the target's bytes: valid UTF-8, no control
// characters (a newline in a label would be the least of it), bounded.
std::optional<std::string> Clean(std::string_view s) {
  if (s.size() > kMaxName) s = s.substr(0, kMaxName);
  std::string out = base::ValidUtf8(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '_';
  if (out.empty() || out == "." || out == "..") return std::nullopt;
  return out;
}

// python, python3, python3.12, python3.13t (free-threaded), python3.12d (debug).
bool IsPython(std::string_view name) {
  if (!name.starts_with("python")) return false;
  name.remove_prefix(6);
  if (!name.empty() && (name.back() == 't' || name.back() == 'd')) name.remove_suffix(1);
  for (char c : name)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  return true;
}

// CPython's options that take a value (`-W arg`, `-Xopt`, `--check-hash-based-pycs mode`).
bool TakesValue(char option) { return option == 'W' || option == 'X'; }

bool IsUnitNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == ':' || c == '-' || c == '_' || c == '.' || c == '@' ||
         c == '\\';
}

}  // namespace

std::optional<std::string> SystemdServiceFromCgroup(std::string_view text) {
  int lines = 0;
  while (!text.empty() && lines++ < kMaxLines) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    // hierarchy-ID:controllers:path; systemd's tree is the unified one (0::)
    // or, under cgroup v1, the named hierarchy name=systemd.
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const bool systemd_tree = (line.substr(0, c1) == "0" && controllers.empty()) || controllers == "name=systemd";
    if (!systemd_tree) continue;
    std::string_view path = line.substr(c2 + 1);
    // Innermost first: a service inside a user's manager is that service.
    for (int parts = 0; !path.empty() && parts < 64; parts++) {
      while (!path.empty() && path.back() == '/') path.remove_suffix(1);
      const size_t slash = path.rfind('/');
      std::string_view part = slash == std::string_view::npos ? path : path.substr(slash + 1);
      path = slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
      if (!part.ends_with(".service") || part.starts_with("user@")) continue;
      part.remove_suffix(8);
      if (part.empty() || part.size() > kMaxName) continue;
      bool ok = true;
      for (char c : part) ok = ok && IsUnitNameChar(c);
      if (ok) return std::string(part);
    }
  }
  return std::nullopt;
}

std::optional<std::string> ScriptFromCmdline(std::string_view cmdline) {
  std::string_view args[kMaxArgs];
  int n = 0;
  while (!cmdline.empty() && n < kMaxArgs) {
    const size_t end = cmdline.find('\0');
    args[n++] = cmdline.substr(0, end);
    cmdline.remove_prefix(end == std::string_view::npos ? cmdline.size() : end + 1);
  }
  if (n == 0 || args[0].empty()) return std::nullopt;
  // setproctitle() and friends write the title over argv with spaces, not
  // NULs: only the first word is the program.
  const std::string_view program = BaseName(args[0].substr(0, args[0].find(' ')));
  if (!IsPython(program)) return Clean(program);
  for (int i = 1; i < n; i++) {
    const std::string_view a = args[i];
    if (a == "-" || a.empty()) return std::nullopt;  // a script from stdin
    if (a == "--") return i + 1 < n ? Clean(BaseName(args[i + 1])) : std::nullopt;
    if (a.starts_with("--")) {
      if (a == "--check-hash-based-pycs") i++;
      continue;
    }
    if (a[0] != '-') return Clean(BaseName(a));
    // A cluster of one-letter options (-uO); -c, -m, -W and -X end it.
    for (size_t k = 1; k < a.size(); k++) {
      const char o = a[k];
      if (o == 'c') return std::nullopt;  // inline code: no script to name it
      if (o == 'm') {
        if (k + 1 < a.size()) return Clean(a.substr(k + 1));
        return i + 1 < n ? Clean(args[i + 1]) : std::nullopt;
      }
      if (TakesValue(o)) {
        if (k + 1 == a.size()) i++;  // the value is the next argument
        break;
      }
    }
  }
  return std::nullopt;
}

ServiceHints ReadServiceHints(pid_t pid, const std::string& proc) {
  ServiceHints hints;
  const std::string base = absl::StrCat(proc, "/", pid);
  if (auto unit = SystemdServiceFromCgroup(ReadProcFile(base + "/cgroup", 64u << 10))) hints.systemd_service = *unit;
  if (auto script = ScriptFromCmdline(ReadProcFile(base + "/cmdline", 4096))) hints.script = *script;
  return hints;
}

}  // namespace gpuflame::profiler
