#include "symbolizer/elf_cache.h"

namespace gpuflame::symbolizer {

const ElfFile* ElfCache::Get(pid_t pid, const inspect::Mapping& m) {
  inspect::FileKey key = inspect::FileKey::Of(m);
  auto it = files_.find(key);
  if (it != files_.end()) return it->second.get();
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
  std::unique_ptr<ElfFile> value;
  if (elf.ok()) {
    value = std::make_unique<ElfFile>(std::move(*elf));
  } else {
    failures_++;
  }
  const ElfFile* raw = value.get();
  files_.emplace(key, std::move(value));
  return raw;
}

size_t ElfCache::MemoryUsage() const {
  size_t total = 0;
  for (const auto& [k, f] : files_)
    if (f) total += f->MemoryUsage();
  return total;
}

}  // namespace gpuflame::symbolizer
