#include "base/scoped_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gpuflame::base {

void ScopedFd::reset(int fd) {
  int old = std::exchange(fd_, fd < 0 ? -1 : fd);
  if (old < 0 || old == fd_) return;  // nothing held, or handed the same fd back
  int saved = errno;
  (void)::close(old);  // see the header: failures leave nothing to retry
  errno = saved;
}

int ScopedFd::Close() {
  int fd = release();
  return fd < 0 ? 0 : ::close(fd);
}

ScopedFd ScopedFd::Dup(int fd) {
  if (fd < 0) return ScopedFd();
  return ScopedFd(fcntl(fd, F_DUPFD_CLOEXEC, 0));
}

std::optional<Pipe> Pipe::Open() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  return Pipe{ScopedFd(fds[0]), ScopedFd(fds[1])};
}

void DirCloser::operator()(DIR* dir) const {
  if (dir) closedir(dir);
}

}  // namespace gpuflame::base
