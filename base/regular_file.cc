#include "base/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace gpuflame::base {
namespace {

bool Same(const struct stat& st, const FileIdentity& want) {
  return st.st_ino == want.inode && major(st.st_dev) == want.dev_major && minor(st.st_dev) == want.dev_minor;
}

}  // namespace

ScopedFd OpenRegularFile(const std::string& path, const std::optional<FileIdentity>& want) {
  // O_PATH: the path is walked but the object is not opened, so a FIFO's
  // open does not wait and a device's driver is not called.
  return ReopenRegularFile(ScopedFd(open(path.c_str(), O_PATH | O_CLOEXEC)), want);
}

ScopedFd ReopenRegularFile(const ScopedFd& where, const std::optional<FileIdentity>& want) {
  if (!where) return ScopedFd();
  struct stat st {};
  if (fstat(where.get(), &st) != 0) return ScopedFd();
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return ScopedFd();
  }
  if (want && !Same(st, *want)) {
    errno = ESTALE;
    return ScopedFd();
  }
  // The magic link names the inode |where| holds, not the path again: a swap
  // after the check cannot substitute another file. O_NONBLOCK makes a
  // conflicting lease fail the open at once instead of waiting for its
  // break; on a regular file it changes nothing else. O_NOCTTY for form.
  ScopedFd fd(open(absl::StrCat("/proc/self/fd/", where.get()).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  return fd;
}

}  // namespace gpuflame::base
