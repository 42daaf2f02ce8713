// Binaries and debug files found by GNU build ID, for frames recorded as raw
// addresses (stripped library, file unreadable at capture): in each directory
// first the debuginfod/distribution layout `.build-id/ab/cdef....debug` (one
// path probe), then a bounded recursive scan. Stripped and unstripped copies
// share a build ID: the copy with the most symbols wins.
// Not thread-safe.
#ifndef GPUFLAME_SYMBOLIZER_BUILD_ID_INDEX_H_
#define GPUFLAME_SYMBOLIZER_BUILD_ID_INDEX_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "symbolizer/elf_file.h"

namespace gpuflame::symbolizer {

// |dir|/.build-id/ab/cdef...: where the distribution layout puts the file
// of |build_id| (hex, at least 3 digits); debug files add ".debug".
std::string BuildIdPath(const std::string& dir, const std::string& build_id);

class BuildIdIndex {
 public:
  explicit BuildIdIndex(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}

  // The file with |build_id| (hex) that has symbols, opened once; nullptr if
  // none is known. A miss is remembered until Rescan().
  const ElfFile* Find(const std::string& build_id);
  // Forgets misses and the scan, so files added since are found (the agent
  // calls this once per window that still has unresolved frames).
  void Rescan();
  bool empty() const { return dirs_.empty(); }
  // ELF files parsed by scans so far (unchanged files are not parsed again).
  size_t files_opened() const { return files_opened_; }

 private:
  void ScanOnce();

  std::vector<std::string> dirs_;
  struct Seen {
    uint64_t size = 0;
    int64_t mtime = 0;
    std::string build_id;  // empty: not an ELF file with one
    size_t symbols = 0;
  };
  bool scanned_ = false;
  size_t files_opened_ = 0;
  absl::flat_hash_map<std::string, Seen> seen_;  // path -> what the last scan found
  std::map<std::string, std::string> scan_;      // build ID -> best path
  std::map<std::string, std::unique_ptr<ElfFile>> opened_;  // nullptr: none
};

}  // namespace gpuflame::symbolizer

#endif  // GPUFLAME_SYMBOLIZER_BUILD_ID_INDEX_H_
