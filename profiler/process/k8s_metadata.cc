#include "profiler/process/k8s_metadata.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>

#include "absl/strings/str_cat.h"
#include "base/regular_file.h"
#include "base/scoped_fd.h"

namespace gpuflame::profiler {
namespace {

std::string ReadFd(const base::ScopedFd& fd, size_t limit) {
  if (!fd) return "";
  std::string out(limit, '\0');
  ssize_t n = read(fd.get(), out.data(), limit);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

std::string ReadSmall(const std::string& path, size_t limit = 4096) {
  return ReadFd(base::ScopedFd(open(path.c_str(), O_RDONLY | O_CLOEXEC)), limit);
}

// Reads |path| as the container sees it: every symlink, absolute ones
// included (/var/run -> /run), resolves inside |root|, and nothing can lead
// out of it to a file of the node (openat2 RESOLVE_IN_ROOT, Linux 5.6+).
std::string ReadInRoot(const std::string& root, const std::string& path, size_t limit) {
  base::ScopedFd dir(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return "";
  open_how how{};
  // O_PATH, then a regular file only: the container may have put a FIFO
  // there, whose open would wait for a writer forever.
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  base::ScopedFd where(static_cast<int>(syscall(SYS_openat2, dir.get(), path.c_str(), &how, sizeof(how))));
  return ReadFd(base::ReopenRegularFile(where), limit);
}

std::string FirstLine(std::string s) {
  auto nl = s.find_first_of("\r\n");
  if (nl != std::string::npos) s.resize(nl);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// 8-4-4-4-12 hex digits. Dashes are checked at every position, not only at
// the four separators: the scan above also takes dashes and underscores as
// digits, and a path like `pod0b9ad8e1-7c4e-4c8e-9a3e-3f-7c4e-...` must not
// become a pod UID label (found by tests/fuzz/k8s_metadata_fuzzer.cc).
bool IsUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); i++) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !IsHex(s[i])) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> ContainerIdFromCgroup(std::string_view text) {
  // The innermost 64-hex run on any line: `/docker/<id>`, `docker-<id>.scope`,
  // `cri-containerd-<id>.scope`, `crio-<id>.scope`, `/kubepods/.../<id>`.
  std::optional<std::string> found;
  size_t run = 0;
  for (size_t i = 0; i <= text.size(); i++) {
    if (i < text.size() && IsHex(text[i])) {
      run++;
      continue;
    }
    if (run == 64) {
      bool bounded_left = i - run == 0 || !std::isalnum(static_cast<unsigned char>(text[i - run - 1]));
      if (bounded_left) found = std::string(text.substr(i - run, 64));
    }
    run = 0;
  }
  return found;
}

std::optional<std::string> PodUidFromCgroup(std::string_view text) {
  // cgroupfs: `/kubepods/burstable/pod<uid-with-dashes>/`
  // systemd:  `kubepods-burstable-pod<uid_with_underscores>.slice`
  for (size_t pos = text.find("pod"); pos != std::string_view::npos; pos = text.find("pod", pos + 3)) {
    size_t start = pos + 3;
    std::string uid;
    size_t i = start;
    while (i < text.size() && uid.size() < 36 && (IsHex(text[i]) || text[i] == '-' || text[i] == '_')) {
      uid += text[i] == '_' ? '-' : text[i];
      i++;
    }
    if (IsUuid(uid)) return uid;
  }
  return std::nullopt;
}

std::optional<std::string> ContainerNameFromMountinfo(std::string_view text, std::string_view pod_uid) {
  // Fields: id parent major:minor root mountpoint ...; the root is what we want.
  std::string needle = absl::StrCat("/pods/", std::string(pod_uid), "/containers/");
  size_t lines = 0;
  while (!text.empty() && lines++ < 10000) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    std::string_view f = line;
    for (int skip = 0; skip < 3 && !f.empty(); skip++) {
      size_t sp = f.find(' ');
      f = sp == std::string_view::npos ? std::string_view() : f.substr(sp + 1);
    }
    std::string_view root = f.substr(0, f.find(' '));
    size_t at = root.find(needle);
    if (at == std::string_view::npos) continue;
    std::string_view rest = root.substr(at + needle.size());
    std::string_view name = rest.substr(0, rest.find('/'));
    if (!name.empty() && name.size() <= 253) return std::string(name);
  }
  return std::nullopt;
}

PodInfo ReadPodInfo(pid_t pid, const std::string& proc) {
  PodInfo info;
  std::string base = absl::StrCat(proc, "/", pid);
  std::string cgroup = ReadSmall(base + "/cgroup", 64u << 10);
  if (auto id = ContainerIdFromCgroup(cgroup)) info.container_id = *id;
  if (auto uid = PodUidFromCgroup(cgroup)) info.pod_uid = *uid;
  if (!info.in_kubernetes()) return info;
  if (auto name = ContainerNameFromMountinfo(ReadSmall(base + "/mountinfo", 1 << 20), info.pod_uid))
    info.container = *name;
  info.pod = FirstLine(ReadInRoot(base + "/root", "/etc/hostname", 256));
  info.namespace_name =
      FirstLine(ReadInRoot(base + "/root", "/var/run/secrets/kubernetes.io/serviceaccount/namespace", 256));
  return info;
}

}  // namespace gpuflame::profiler
