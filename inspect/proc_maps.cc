#include "inspect/proc_maps.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/regular_file.h"
#include "inspect/bounded_read.h"
#include "inspect/mount_types.h"

namespace gpuflame::inspect {
namespace {

constexpr size_t kMaxMapsBytes = 64u << 20;

bool ParseHex(std::string_view& s, uint64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (r.ec != std::errc()) return false;
  s.remove_prefix(static_cast<size_t>(r.ptr - s.data()));
  return true;
}
bool ParseDec(std::string_view& s, uint64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  if (r.ec != std::errc()) return false;
  s.remove_prefix(static_cast<size_t>(r.ptr - s.data()));
  return true;
}
bool Expect(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}
void SkipSpaces(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
}

}  // namespace

std::string_view Mapping::Basename() const {
  std::string_view p = path;
  auto slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

std::vector<Mapping> ParseProcMaps(std::string_view text, size_t max_mappings) {
  std::vector<Mapping> out;
  while (!text.empty() && out.size() < max_mappings) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    Mapping m;
    uint64_t major = 0, minor = 0;
    std::string_view s = line;
    if (!ParseHex(s, m.start) || !Expect(s, '-') || !ParseHex(s, m.end) || !Expect(s, ' ')) continue;
    if (s.size() < 5) continue;
    m.writable = s[1] == 'w';
    m.executable = s[2] == 'x';
    s.remove_prefix(4);
    if (!Expect(s, ' ') || !ParseHex(s, m.offset) || !Expect(s, ' ') || !ParseHex(s, major) || !Expect(s, ':') ||
        !ParseHex(s, minor) || !Expect(s, ' ') || !ParseDec(s, m.inode))
      continue;
    SkipSpaces(s);
    m.dev_major = static_cast<uint32_t>(major);
    m.dev_minor = static_cast<uint32_t>(minor);
    constexpr std::string_view kDeleted = " (deleted)";
    if (s.size() > kDeleted.size() && s.substr(s.size() - kDeleted.size()) == kDeleted) {
      m.deleted = true;
      s.remove_suffix(kDeleted.size());
    }
    m.path = std::string(s);
    out.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<std::vector<Mapping>> ReadProcMaps(pid_t pid) {
  // A read of its memory is stuck in the kernel, maybe holding the lock
  // that reading its maps takes (bounded_read.h).
  if (Poisoned(pid)) return absl::UnavailableError(absl::StrCat("pid ", pid, ": its memory stopped answering"));
  std::string path = absl::StrCat("/proc/", pid, "/maps");
  base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(absl::StrCat("no such process: ", pid));
  std::string text;
  char buf[64 << 10];
  while (text.size() < kMaxMapsBytes) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  fd.reset();
  // An exiting process (its memory gone, not yet reaped) reads as empty:
  // "no such process" for every caller, never a map list that would
  // replace the one it had (its last records still need it).
  if (text.empty()) return absl::NotFoundError(absl::StrCat("process ", pid, " has no mappings (exiting)"));
  return ParseProcMaps(text);
}

PinnedFile PinnedFile::Open(pid_t pid, const Mapping& m) {
  // On FUSE, not even its path is walked (OpenablePath is empty then).
  const std::string path = OpenablePath(pid, m);
  if (path.empty()) {
    errno = EPERM;
    return PinnedFile(base::ScopedFd());
  }
  // The very file mapped, checked before it is opened: the process may have
  // swapped a FIFO or another file in at that path.
  const base::FileIdentity same{m.inode, m.dev_major, m.dev_minor};
  auto open_same = [&](const std::string& path) { return base::OpenRegularFile(path, same); };
  base::ScopedFd fd = open_same(path);
  if (!fd && !m.path.empty() && m.path.front() == '/') fd = open_same(m.path);
  return PinnedFile(std::move(fd));
}

std::string PinnedFile::path() const { return absl::StrCat("/proc/self/fd/", fd_.get()); }

std::string OpenablePath(pid_t pid, const Mapping& m) {
  // On FUSE, the server may never answer even a path walk.
  if (OnFuse(pid, m.dev_major, m.dev_minor)) {
    NoteFuseFileRefused(pid, m.inode, m.dev_major, m.dev_minor, m.path);
    return {};
  }
  if (m.deleted || m.path.empty() || m.path.front() != '/')
    return absl::StrFormat("/proc/%d/map_files/%x-%x", pid, m.start, m.end);
  return absl::StrCat("/proc/", pid, "/root", m.path);
}

}  // namespace gpuflame::inspect
