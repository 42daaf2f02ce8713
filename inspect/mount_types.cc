#include "inspect/mount_types.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"

namespace gpuflame::inspect {
namespace {

// The next space-separated field of |line|, consumed.
std::string_view NextField(std::string_view& line) {
  const size_t space = line.find(' ');
  std::string_view field = line.substr(0, space);
  line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
  return field;
}

bool ParseU32(std::string_view s, uint32_t& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string ReadBounded(const std::string& path) {
  base::ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::string text;
  if (!fd) return text;
  char buf[64 << 10];
  while (text.size() < kMaxMountinfoBytes) {
    const ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// (mount namespace inode, major, minor) -> on FUSE, and when that was read.
using CacheKey = std::tuple<uint64_t, uint32_t, uint32_t>;
struct Answer {
  bool fuse;
  int64_t at_ns;
};
constexpr size_t kMaxCached = 4096;

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::optional<std::string> FsTypeOfDevice(std::string_view mountinfo, uint32_t major, uint32_t minor) {
  while (!mountinfo.empty()) {
    const size_t nl = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, nl);
    mountinfo.remove_prefix(nl == std::string_view::npos ? mountinfo.size() : nl + 1);
    // ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
    NextField(line);
    NextField(line);
    std::string_view dev = NextField(line);
    const size_t colon = dev.find(':');
    uint32_t ma = 0, mi = 0;
    if (colon == std::string_view::npos || !ParseU32(dev.substr(0, colon), ma) ||
        !ParseU32(dev.substr(colon + 1), mi) || ma != major || mi != minor)
      continue;
    // Mount points escape spaces (\040): " - " only ever separates.
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    line.remove_prefix(dash + 3);
    std::string_view type = NextField(line);
    if (type.empty()) continue;
    return std::string(type);
  }
  return std::nullopt;
}

bool ServedByAProcess(std::string_view fstype) {
  return fstype == "fuse" || fstype == "fuseblk" || fstype.starts_with("fuse.");
}

bool OnFuse(pid_t pid, uint32_t major, uint32_t minor) {
  if (major != 0) return false;
  static std::mutex mu;
  static auto* cache = new absl::flat_hash_map<CacheKey, Answer>();  // never destroyed: any thread, any time
  struct stat ns {};
  const bool known_ns = stat(absl::StrCat("/proc/", pid, "/ns/mnt").c_str(), &ns) == 0;
  const CacheKey key{known_ns ? static_cast<uint64_t>(ns.st_ino) : 0, major, minor};
  const int64_t now = MonotonicNs();
  if (known_ns) {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(key); it != cache->end() && now - it->second.at_ns < kFuseCacheNs) return it->second.fuse;
  }
  const std::string text = ReadBounded(absl::StrCat("/proc/", pid, "/mountinfo"));
  const std::optional<std::string> type = FsTypeOfDevice(text, major, minor);
  const bool fuse = type && ServedByAProcess(*type);
  if (known_ns) {
    std::lock_guard<std::mutex> lock(mu);
    if (cache->size() >= kMaxCached) cache->clear();
    (*cache)[key] = Answer{fuse, now};
  }
  return fuse;
}

namespace {
struct Refusals {
  std::mutex mu;
  absl::flat_hash_set<std::tuple<uint64_t, uint32_t, uint32_t>> said;  // files said already
  std::vector<std::string> waiting;
  uint64_t total = 0;
};
Refusals& Refused() {
  static auto* r = new Refusals;  // never destroyed: any thread, any time
  return *r;
}
}  // namespace

void NoteFuseFileRefused(pid_t pid, uint64_t inode, uint32_t major, uint32_t minor, std::string_view path) {
  Refusals& r = Refused();
  std::lock_guard<std::mutex> lock(r.mu);
  r.total++;
  if (r.said.size() >= kMaxCached) r.said.clear();
  if (r.said.emplace(inode, major, minor).second && r.waiting.size() < 256)
    r.waiting.push_back(absl::StrCat("pid ", pid, ": ", std::string(path.substr(0, 512))));
}

std::vector<std::string> TakeFuseFilesRefused() {
  Refusals& r = Refused();
  std::lock_guard<std::mutex> lock(r.mu);
  return std::exchange(r.waiting, {});
}

uint64_t FuseFilesRefused() {
  Refusals& r = Refused();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.total;
}

}  // namespace gpuflame::inspect
