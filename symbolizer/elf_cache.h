// ELF files shared by every profiled process, keyed by (device, inode): the
// same libcuda or libpython mapped into a hundred pods is parsed once.
// Failures are cached too so a broken file is not re-read at every event.
//
// Files are let go once no running process uses them (Sweep): an agent on a
// node whose jobs come and go, each image with a libtorch of its own, would
// otherwise keep every image's tables, hundreds of MB over a few jobs, for
// good. A file is
// kept a while after its last user has gone, so that a job restarted at
// once finds it parsed (libtorch_cpu.so takes ~0.3 s to index, on the event
// loop).
// Not thread-safe: owned by the event loop.
#ifndef GPUFLAME_SYMBOLIZER_ELF_CACHE_H_
#define GPUFLAME_SYMBOLIZER_ELF_CACHE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "inspect/proc_maps.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::symbolizer {

class ElfCache {
 public:
  // The parsed file behind |m| in |pid|, or nullptr (counted in failures()).
  // |pid| is remembered as one of the file's users. The pointer is good
  // until the next Sweep(), the one call that frees: hold it no longer than
  // the call that asked for it.
  const ElfFile* Get(pid_t pid, const inspect::Mapping& m);

  // Forgets the users |alive| says are gone, then frees each file that has
  // had none, and no lookup, for |keep_ns| (0: at once). |evicted| is told
  // of them all before any is freed, so that what is keyed by them (names,
  // DWARF) goes first. Returns how many went.
  size_t Sweep(int64_t now_ns, int64_t keep_ns, absl::FunctionRef<bool(pid_t)> alive,
               absl::FunctionRef<void(std::span<const ElfFile* const>)> evicted);
  // |pid| no longer maps what it did (it called exec): it holds no file
  // until it looks one up again.
  void ForgetUser(pid_t pid);

  size_t size() const { return files_.size(); }
  size_t failures() const { return failures_; }
  // Files freed by Sweep() so far (failures included: they are tried again).
  size_t evicted() const { return evicted_; }
  size_t MemoryUsage() const;

 private:
  struct Entry {
    std::unique_ptr<ElfFile> file;  // nullptr: failed
    absl::flat_hash_set<pid_t> users;
    pid_t last_user = 0;           // saves a set insert when one process asks again
    int64_t unused_since_ns = -1;  // -1: some user was alive at the last sweep
  };
  absl::flat_hash_map<inspect::FileKey, Entry> files_;
  size_t failures_ = 0;
  size_t evicted_ = 0;
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_ELF_CACHE_H_
