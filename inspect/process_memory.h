// Reading another process's memory: the profiled process is untrusted, so
// every read is bounded by the caller and may fail at any time (the process
// can exit, unmap, or hand us garbage pointers).
#ifndef GPUFLAME_INSPECT_PROCESS_MEMORY_H_
#define GPUFLAME_INSPECT_PROCESS_MEMORY_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpuflame::inspect {

class ProcessMemory {
 public:
  virtual ~ProcessMemory() = default;
  // Copies exactly |len| bytes at |addr| into |out|; false if any byte is unreadable.
  virtual bool Read(uint64_t addr, void* out, size_t len) const = 0;

  template <typename T>
  std::optional<T> ReadValue(uint64_t addr) const {
    T value;
    if (!Read(addr, &value, sizeof(value))) return std::nullopt;
    return value;
  }
};

// process_vm_readv on a live pid, in bounded time (bounded_read.h): memory
// with no file behind it is read directly, the rest through a worker that
// may be abandoned. Which is which comes from /proc/PID/maps, read again
// (at most once a second) when an address falls outside what it knew: a
// Python process keeps mapping new arenas. A userfaultfd that catches the
// kernel's faults can still hold a direct read; it takes privilege
// (vm.unprivileged_userfaultfd is 0 by default).
// A process whose leader thread has ended while others run on (main()'s
// pthread_exit) is read through one of those: the kernel serves neither the
// zombie leader's maps nor process_vm_readv on its pid, but does on any
// live thread's (thread_group.h's LiveThreadOf), whose address space is the same.
// Not thread-safe (it caches the process's anonymous ranges).
class RemoteProcessMemory final : public ProcessMemory {
 public:
  explicit RemoteProcessMemory(pid_t pid) : pid_(pid) {}
  bool Read(uint64_t addr, void* out, size_t len) const override;
  // Reads direct / through a worker so far (for tests and the summary).
  uint64_t direct_reads() const { return direct_; }
  uint64_t worker_reads() const { return worker_; }

 private:
  bool Anonymous(uint64_t addr, size_t len) const;
  void LoadAnonymous() const;
  // After a failed read, at most every 10 ms: whether to read through a
  // live thread from now on (the leader may have ended). True if that
  // changed.
  bool FollowLiveThread() const;
  pid_t Via() const { return via_ ? via_ : pid_; }

  pid_t pid_;
  mutable pid_t via_ = 0;             // a live thread read instead of the ended leader; 0: the pid itself
  mutable int64_t followed_ns_ = -1;  // when FollowLiveThread last looked
  mutable std::vector<std::pair<uint64_t, uint64_t>> anonymous_;  // [start, end), sorted
  mutable int64_t loaded_ns_ = -1;                                // CLOCK_MONOTONIC of the last maps read, -1: never
  mutable uint64_t direct_ = 0;
  mutable uint64_t worker_ = 0;
};

// A byte buffer mapped at a fixed address. For tests and offline data.
class BufferMemory final : public ProcessMemory {
 public:
  BufferMemory(uint64_t base, std::string bytes) : base_(base), bytes_(std::move(bytes)) {}
  bool Read(uint64_t addr, void* out, size_t len) const override {
    if (addr < base_ || addr - base_ > bytes_.size() || len > bytes_.size() - (addr - base_)) return false;
    std::memcpy(out, bytes_.data() + (addr - base_), len);
    return true;
  }

 private:
  uint64_t base_;
  std::string bytes_;
};

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_PROCESS_MEMORY_H_
