// /proc/PID/maps, parsed with bounds: a process may have many mappings and
// odd paths (spaces, "(deleted)", container paths).
#ifndef GPUFLAME_INSPECT_PROC_MAPS_H_
#define GPUFLAME_INSPECT_PROC_MAPS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/scoped_fd.h"

namespace gpuflame::inspect {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  bool writable = false;
  bool executable = false;
  bool deleted = false;
  std::string path;  // as the process sees it (its mount namespace)

  bool Contains(uint64_t addr) const { return addr >= start && addr < end; }
  std::string_view Basename() const;
};

// A mapped file's identity across processes and mount namespaces: the same
// libcuda seen by a hundred pods is one FileKey.
struct FileKey {
  uint32_t major = 0, minor = 0;
  uint64_t inode = 0;
  static FileKey Of(const Mapping& m) { return {m.dev_major, m.dev_minor, m.inode}; }
  bool operator==(const FileKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const FileKey& k) {
    return H::combine(std::move(h), k.major, k.minor, k.inode);
  }
};

// Parses the text of a maps file. Lines that do not parse are skipped.
std::vector<Mapping> ParseProcMaps(std::string_view text, size_t max_mappings = 1 << 20);
absl::StatusOr<std::vector<Mapping>> ReadProcMaps(pid_t pid);

// A path from which this process's view of |m| can be opened by the agent:
// through the process's root (containers), falling back to map_files for
// deleted files. Empty for a file on FUSE (mount_types.h): not to be
// touched; an open of "" fails at once.
std::string OpenablePath(pid_t pid, const Mapping& m);

// |m|'s file held open (same device and inode verified), so that probes can
// be attached through /proc/self/fd/N even if the process exits meanwhile:
// through the process's root (containers), else the path as it named it when
// that is the same file here. Move-only; closes on destruction.
class PinnedFile {
 public:
  static PinnedFile Open(pid_t pid, const Mapping& m);
  bool ok() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // A descriptor of the same file for an owner that outlives this one
  // (libelf, libdw); close-on-exec.
  base::ScopedFd Dup() const { return base::ScopedFd::Dup(fd_.get()); }
  std::string path() const;  // /proc/self/fd/N

 private:
  explicit PinnedFile(base::ScopedFd fd) : fd_(std::move(fd)) {}
  base::ScopedFd fd_;
};

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_PROC_MAPS_H_
