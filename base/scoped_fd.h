// Owners of kernel handles: a file descriptor, a pipe's two ends, an open
// directory. Every descriptor gpuflame opens is held by one of these from the
// moment it exists, so an early return cannot leak it, and a moved-from or
// released owner cannot close a number the kernel has since given to someone
// else (a double close is a use-after-free of descriptors: it closes another
// thread's file). tests/lint/no_raw_close.sh keeps close() out of every other
// file. cupti/ links nothing of ours and has no descriptors to own.
#ifndef GPUFLAME_BASE_SCOPED_FD_H_
#define GPUFLAME_BASE_SCOPED_FD_H_

#include <dirent.h>

#include <memory>
#include <optional>
#include <utility>

namespace gpuflame::base {

// Move-only owner of one file descriptor; -1 (any negative value) is none,
// so `ScopedFd fd(open(...))` is the idiom and a failed open is simply
// invalid. Closes in the destructor, never closes -1, retries nothing.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd < 0 ? -1 : fd) {}
  ScopedFd(ScopedFd&& o) noexcept : fd_(o.release()) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept {
    reset(o.release());  // self-move: release() then reset() keeps the fd
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Gives the descriptor up without closing it: for a new owner that is not
  // a ScopedFd (libdw, libbpf, fdopen) or one that must outlive every owner.
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }

  // Closes the held descriptor (if any) and holds |fd| instead. The close's
  // result is ignored, as in the destructor: on Linux the descriptor is gone
  // even when close() fails (EINTR, EIO), so there is nothing to retry (a
  // retry could close a number another thread has just been given), and for
  // what we read there is nothing to report. errno is left as it was, so an
  // error path can still read it after an owner went out of scope.
  void reset(int fd = -1);

  // Closes now and returns close()'s result (0, or -1 with errno): for files
  // we write, where a failed close can be the only sign of lost data (NFS,
  // quota). The owner is empty afterwards either way.
  int Close();

  // A close-on-exec duplicate of |fd| (F_DUPFD_CLOEXEC; plain dup() would
  // leak the copy into every child we exec). Invalid if |fd| is.
  static ScopedFd Dup(int fd);

 private:
  int fd_ = -1;
};

// Both ends of a pipe, close-on-exec (pipe2 O_CLOEXEC): a child that should
// see an end after exec gets it through dup2(), which clears the flag on the
// copy, and no other child inherits it by accident and holds the pipe open.
struct Pipe {
  ScopedFd read_end;
  ScopedFd write_end;
  // nullopt (errno set) when the pipe cannot be made.
  static std::optional<Pipe> Open();
};

// An opendir() stream (glibc opens it close-on-exec), closedir() on scope exit.
struct DirCloser {
  void operator()(DIR* dir) const;
};
using ScopedDir = std::unique_ptr<DIR, DirCloser>;

}  // namespace gpuflame::base

#endif  // GPUFLAME_BASE_SCOPED_FD_H_
