#include "inspect/process_memory.h"

#include <time.h>

#include <algorithm>

#include "inspect/bounded_read.h"
#include "inspect/proc_maps.h"

namespace gpuflame::inspect {
namespace {

constexpr int64_t kReloadNs = 1'000'000'000;

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

void RemoteProcessMemory::LoadAnonymous() const {
  loaded_ns_ = MonotonicNs();
  if (Poisoned(pid_)) return;  // its maps take the lock a stuck read may hold
  auto maps = ReadProcMaps(pid_);
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
    return ReadDirect(pid_, addr, out, len);
  }
  worker_++;
  return ReadWithDeadline(pid_, addr, out, len);
}

}  // namespace gpuflame::inspect
