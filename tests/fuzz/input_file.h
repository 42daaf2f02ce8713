// A fuzz input as a file, for parsers that take a path (the ELF readers map
// files through libelf, the spool and the config loader read them by name):
// one regular file in a directory of this process's own under $TMPDIR,
// rewritten for each input and removed at exit. A plain path, not
// /proc/self/fd/N of a memfd, so that it opens like the files the parsers
// meet in production, whatever checks their opens make.
#ifndef GPUFLAME_TESTS_FUZZ_INPUT_FILE_H_
#define GPUFLAME_TESTS_FUZZ_INPUT_FILE_H_

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/scoped_fd.h"

namespace gpuflame::fuzz {

// This process's scratch directory (created on first use, removed at exit).
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/gpuflame-fuzz-XXXXXX";
    // Not an input's fault: stop rather than test nothing.
    if (!mkdtemp(templ.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string to_remove;
    to_remove = templ;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return templ;
  }();
  return dir;
}

// Writes |data| to |path| (created or truncated); aborts if it cannot.
inline void WriteWhole(const std::string& path, const uint8_t* data, size_t size) {
  base::ScopedFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  size_t done = 0;
  while (fd && done < size) {
    const ssize_t n = write(fd.get(), data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (!fd || done != size) {
    std::perror(path.c_str());
    std::abort();
  }
}

// ScratchDir()/|name| holding |data|.
inline std::string InputFile(const char* name, const uint8_t* data, size_t size) {
  std::string path = ScratchDir() + "/" + name;
  WriteWhole(path, data, size);
  return path;
}

}  // namespace gpuflame::fuzz

#endif  // GPUFLAME_TESTS_FUZZ_INPUT_FILE_H_
