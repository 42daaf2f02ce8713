#include "symbolizer/elf_cache.h"

#include <vector>

namespace gpuflame::symbolizer {

const ElfFile* ElfCache::Get(pid_t pid, const inspect::Mapping& m) {
  inspect::FileKey key = inspect::FileKey::Of(m);
  auto it = files_.find(key);
  if (it != files_.end()) {
    Entry& e = it->second;
    e.unused_since_ns = -1;
    if (e.last_user != pid) {
      e.users.insert(pid);
      e.last_user = pid;
    }
    return e.file.get();
  }
  auto elf = ElfFile::Open(inspect::OpenablePath(pid, m));
  if (!elf.ok() && !m.deleted) {
    // The path may not exist in our namespace view (a racing unlink): map_files
    // still names the mapped file.
    inspect::Mapping copy = m;
    copy.deleted = true;
    elf = ElfFile::Open(inspect::OpenablePath(pid, copy));
  }
  if (!elf.ok() && !m.path.empty() && m.path.front() == '/') {
    // The process is gone (no /proc/PID/root): the path as it named it is
    // right when it shared our mount namespace, the common case outside
    // containers. The build ID recorded with each frame tells if not.
    elf = ElfFile::Open(m.path);
  }
  Entry e;
  if (elf.ok()) {
    e.file = std::make_unique<ElfFile>(std::move(*elf));
  } else {
    failures_++;
  }
  e.users.insert(pid);
  e.last_user = pid;
  return files_.emplace(key, std::move(e)).first->second.file.get();
}

size_t ElfCache::Sweep(int64_t now_ns, int64_t keep_ns, absl::FunctionRef<bool(pid_t)> alive,
                       absl::FunctionRef<void(std::span<const ElfFile* const>)> evicted) {
  // Each user is asked once per sweep however many files it maps.
  absl::flat_hash_map<pid_t, bool> verdicts;
  auto is_alive = [&](pid_t pid) {
    auto [it, inserted] = verdicts.try_emplace(pid, false);
    if (inserted) it->second = alive(pid);
    return it->second;
  };
  std::vector<inspect::FileKey> gone;
  std::vector<const ElfFile*> files;
  for (auto& [key, e] : files_) {
    absl::erase_if(e.users, [&](pid_t pid) { return !is_alive(pid); });
    if (!e.users.contains(e.last_user)) e.last_user = 0;
    if (!e.users.empty()) {
      e.unused_since_ns = -1;
      continue;
    }
    if (e.unused_since_ns < 0) e.unused_since_ns = now_ns;
    if (now_ns - e.unused_since_ns < keep_ns) continue;
    gone.push_back(key);
    if (e.file) files.push_back(e.file.get());
  }
  if (!files.empty()) evicted(files);
  for (const inspect::FileKey& key : gone) files_.erase(key);
  evicted_ += gone.size();
  return gone.size();
}

void ElfCache::ForgetUser(pid_t pid) {
  for (auto& [key, e] : files_) {
    e.users.erase(pid);
    if (e.last_user == pid) e.last_user = 0;
  }
}

size_t ElfCache::MemoryUsage() const {
  size_t total = 0;
  for (const auto& [k, e] : files_)
    if (e.file) total += e.file->MemoryUsage();
  return total;
}

}  // namespace gpuflame::symbolizer
