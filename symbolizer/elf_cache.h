// ELF files shared by every profiled process, keyed by (device, inode): the
// same libcuda or libpython mapped into a hundred pods is parsed once.
// Failures are cached too so a broken file is not re-read at every event.
// Not thread-safe: owned by the event loop.
#ifndef GPUFLAME_SYMBOLIZER_ELF_CACHE_H_
#define GPUFLAME_SYMBOLIZER_ELF_CACHE_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "symbolizer/elf_file.h"
#include "inspect/proc_maps.h"

namespace gpuflame::symbolizer {

class ElfCache {
 public:
  // The parsed file behind |m| in |pid|, or nullptr (counted in failures()).
  const ElfFile* Get(pid_t pid, const inspect::Mapping& m);
  size_t size() const { return files_.size(); }
  size_t failures() const { return failures_; }
  size_t MemoryUsage() const;

 private:
  absl::flat_hash_map<inspect::FileKey, std::unique_ptr<ElfFile>> files_;  // nullptr: failed
  size_t failures_ = 0;
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_ELF_CACHE_H_
