#include "inspect/process_memory.h"

#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "inspect/bounded_read.h"
#include "inspect/proc_maps.h"
#include "inspect/proc_stat.h"
#include "inspect/thread_group.h"

namespace gpuflame::inspect {
namespace {

constexpr int64_t kReloadNs = 1'000'000'000;
constexpr int64_t kFollowNs = 10'000'000;  // a failed read looks again after 10 ms at the soonest

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// No file behind it: an anonymous private or shared-anonymous mapping, the
// heap, a thread's stack. Not [vvar]/[vsyscall] (special, and never Python's).
bool NoFileBehind(const Mapping& m) {
  if (m.inode != 0) return false;
  return m.path.empty() || m.path == "[heap]" || m.path.starts_with("[stack") || m.path.starts_with("[anon");
}

}  // namespace

bool RemoteProcessMemory::FollowLiveThread() const {
  const int64_t now = MonotonicNs();
  if (followed_ns_ >= 0 && now - followed_ns_ < kFollowNs) return false;
  followed_ns_ = now;
  // The leader while it lives, else any other live thread: they share the
  // address space.
  const pid_t live = LiveThreadOf(pid_);
  if (live == 0 || live == Via()) return false;
  via_ = live == pid_ ? 0 : live;
  loaded_ns_ = -1;  // its maps, at the next read
  return true;
}

void RemoteProcessMemory::LoadAnonymous() const {
  loaded_ns_ = MonotonicNs();
  if (Poisoned(Via())) return;  // its maps take the lock a stuck read may hold
  auto maps = ReadProcMaps(Via());
  if (!maps.ok() && FollowLiveThread()) {
    loaded_ns_ = MonotonicNs();
    maps = ReadProcMaps(Via());
  }
  if (!maps.ok()) return;
  anonymous_.clear();
  for (const Mapping& m : *maps) {
    if (!NoFileBehind(m)) continue;
    if (!anonymous_.empty() && anonymous_.back().second == m.start) anonymous_.back().second = m.end;  // adjacent
    else anonymous_.emplace_back(m.start, m.end);
  }
  std::sort(anonymous_.begin(), anonymous_.end());
}

bool RemoteProcessMemory::Anonymous(uint64_t addr, size_t len) const {
  if (addr + len < addr) return false;
  auto it = std::upper_bound(anonymous_.begin(), anonymous_.end(), std::pair{addr, UINT64_MAX});
  if (it == anonymous_.begin()) return false;
  --it;
  return addr >= it->first && addr + len <= it->second;
}

bool RemoteProcessMemory::Read(uint64_t addr, void* out, size_t len) const {
  if (len == 0) return true;
  if (loaded_ns_ < 0) LoadAnonymous();
  bool anonymous = Anonymous(addr, len);
  if (!anonymous && MonotonicNs() - loaded_ns_ >= kReloadNs) {
    LoadAnonymous();
    anonymous = Anonymous(addr, len);
  }
  if (anonymous) {
    direct_++;
    if (ReadDirect(Via(), addr, out, len)) return true;
  } else {
    worker_++;
    if (ReadWithDeadline(Via(), addr, out, len)) return true;
  }
  // Its leader may have ended with other threads running on: once more
  // through one of them.
  if (!FollowLiveThread()) return false;
  return Read(addr, out, len);
}

}  // namespace gpuflame::inspect
