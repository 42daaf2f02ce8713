// Opening files whose paths someone else chose. The paths gpuflame reads come
// from profiled processes (their /proc/PID/maps, their root, their debug
// links): a hostile one can swap a directory so the name it mapped now names
// a FIFO, a device or a socket. open(O_RDONLY) on a FIFO waits for a writer
// forever (uninterruptibly for SIGTERM's purposes: the agent hung node-wide),
// and opening a device runs its driver. OpenRegularFile never opens anything
// but a regular file: it resolves the path with O_PATH (no open() of the
// object itself), checks what it found, and only then reopens that very
// inode through /proc/self/fd. Any thread may call it.
#ifndef GPUFLAME_BASE_REGULAR_FILE_H_
#define GPUFLAME_BASE_REGULAR_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/scoped_fd.h"

namespace gpuflame::base {

// Which file a caller means: /proc/PID/maps's inode and device numbers.
struct FileIdentity {
  uint64_t inode = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
};

// A read-only, close-on-exec descriptor of |path| if it is a regular file
// (and, with |want|, that file); otherwise invalid, with errno saying why
// (ENOENT, EINVAL for "not a regular file", ESTALE for "another file now",
// EWOULDBLOCK for a file under a lease someone else holds: we do not wait
// 45 s for its break).
ScopedFd OpenRegularFile(const std::string& path, const std::optional<FileIdentity>& want = std::nullopt);

// The same for a path already resolved with O_PATH (openat2 RESOLVE_IN_ROOT).
ScopedFd ReopenRegularFile(const ScopedFd& where, const std::optional<FileIdentity>& want = std::nullopt);

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_REGULAR_FILE_H_
